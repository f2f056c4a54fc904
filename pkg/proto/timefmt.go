package proto

import "time"

// AppendTime appends t as t.AppendFormat(b, time.RFC3339Nano) does, about
// twice as fast for what records carry (UTC, years 0 to 9999), which
// it writes by hand: every state reply has a time in it.
func AppendTime(b []byte, t time.Time) []byte { return appendTime(b, t, time.RFC3339Nano) }

// TimeNano9 is RFC 3339 with every digit of the nanoseconds: a fixed
// width, as the audit log has its times.
const TimeNano9 = "2006-01-02T15:04:05.000000000Z07:00"

// AppendTimeNano9 appends t as t.AppendFormat(b, TimeNano9) does, about
// twice as fast (as AppendTime).
func AppendTimeNano9(b []byte, t time.Time) []byte { return appendTime(b, t, TimeNano9) }

// appendTime is AppendTime for layout, RFC3339Nano or TimeNano9.
func appendTime(b []byte, t time.Time, layout string) []byte {
	if t.Location() != time.UTC {
		return t.AppendFormat(b, layout)
	}
	sec := t.Unix()
	days := sec / 86400
	if sec%86400 < 0 {
		days--
	}
	sod := int(sec - days*86400)
	y, m, d := civil(days)
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, layout)
	}
	var buf [30]byte // 2006-01-02T15:04:05.999999999Z
	put2(buf[0:], y/100)
	put2(buf[2:], y%100)
	buf[4] = '-'
	put2(buf[5:], m)
	buf[7] = '-'
	put2(buf[8:], d)
	buf[10] = 'T'
	put2(buf[11:], sod/3600)
	buf[13] = ':'
	put2(buf[14:], sod/60%60)
	buf[16] = ':'
	put2(buf[17:], sod%60)
	n := 19
	fixed := layout == TimeNano9
	if ns := t.Nanosecond(); ns != 0 || fixed {
		buf[19] = '.'
		put2(buf[20:], ns/1e7)
		put2(buf[22:], ns/1e5%100)
		put2(buf[24:], ns/1e3%100)
		put2(buf[26:], ns/10%100)
		buf[28] = byte('0' + ns%10)
		n = 29
		for !fixed && buf[n-1] == '0' {
			n--
		}
	}
	buf[n] = 'Z'
	return append(b, buf[:n+1]...)
}

const digits2 = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// put2 writes v (0 to 99) as two digits.
func put2(b []byte, v int) {
	_ = b[1]
	b[0], b[1] = digits2[2*v], digits2[2*v+1]
}

// civil returns the proleptic Gregorian date of the day days after
// 1970-01-01 (H. Hinnant's civil_from_days).
func civil(days int64) (y, m, d int) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // [0, 11], from March
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if mp >= 10 {
		m = int(mp - 9)
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, d
}

// parseTime reads a time in the form AppendTime writes for UTC, the same
// as time.Time.UnmarshalText would, in about 70% of its time. ok is false
// for anything else (another zone, a value out of range), which the
// caller then gives to UnmarshalText.
func parseTime(b []byte) (t time.Time, ok bool) {
	// 2006-01-02T15:04:05Z, or with a fraction of 1 to 9 digits.
	if len(b) < 20 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return t, false
	}
	num := func(b []byte) (int, bool) {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	y, ok1 := num(b[0:4])
	mo, ok2 := num(b[5:7])
	d, ok3 := num(b[8:10])
	h, ok4 := num(b[11:13])
	mi, ok5 := num(b[14:16])
	sec, ok6 := num(b[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || mo < 1 || mo > 12 || d < 1 || d > daysIn(mo, y) || h > 23 || mi > 59 || sec > 59 {
		return t, false
	}
	ns := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' {
			return t, false
		}
		f, ok := num(frac[1:])
		if !ok {
			return t, false
		}
		for range 10 - len(frac) {
			f *= 10
		}
		ns = f
	}
	return time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC), true
}

// daysIn is the number of days of month m of year y.
func daysIn(m, y int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
