package version

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// oid is a git object id (SHA-1).
type oid [sha1.Size]byte

var zeroID oid

func (id oid) String() string { return hex.EncodeToString(id[:]) }

// str is String, but "" for the zero id: the API spells an absent object "".
func (id oid) str() string {
	if id == zeroID {
		return ""
	}
	return id.String()
}

// parseID parses a full 40-hex object id.
func parseID(s string) (oid, bool) {
	var id oid
	if len(s) != 2*len(id) {
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, false
	}
	return id, true
}

// objType is the type of a git object, numbered as in packfiles.
type objType byte

const (
	objCommit   objType = 1
	objTree     objType = 2
	objBlob     objType = 3
	objTag      objType = 4
	objOfsDelta objType = 6
	objRefDelta objType = 7
)

func (t objType) String() string {
	switch t {
	case objCommit:
		return "commit"
	case objTree:
		return "tree"
	case objBlob:
		return "blob"
	case objTag:
		return "tag"
	}
	return "type" + strconv.Itoa(int(t))
}

func parseObjType(s string) (objType, bool) {
	switch s {
	case "commit":
		return objCommit, true
	case "tree":
		return objTree, true
	case "blob":
		return objBlob, true
	case "tag":
		return objTag, true
	}
	return 0, false
}

// objHeader is the "<type> <size>\x00" that git hashes before the content.
func objHeader(b []byte, t objType, size int) []byte {
	b = append(b, t.String()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(size), 10)
	return append(b, 0)
}

// hashObject is the id git gives an object of type t holding data.
func hashObject(t objType, data []byte) oid {
	var buf [32]byte
	h := sha1.New()
	h.Write(objHeader(buf[:0], t, len(data)))
	h.Write(data)
	var id oid
	h.Sum(id[:0])
	return id
}

// BlobHash is the git blob id (40 hex) of a file holding data: what `git
// hash-object` prints.
func BlobHash(data []byte) string { return hashObject(objBlob, data).String() }

// object is an object to write: its type, id and content.
type object struct {
	typ  objType
	id   oid
	data []byte
}
