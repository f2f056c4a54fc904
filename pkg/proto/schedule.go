package proto

import "time"

// Schedule ops (ox-schedule(1)): jobs that start runs of an agent on a
// cron schedule, kept in the agent's versioned tree.
const (
	OpScheduleAdd  = "schedule.add"
	OpScheduleList = "schedule.list"
	OpScheduleRm   = "schedule.rm"
	// OpScheduleRun fires a job now, once.
	OpScheduleRun = "schedule.run"
	// OpScheduleEnable enables or disables a job (a fork's copies of its
	// source's jobs start disabled).
	OpScheduleEnable = "schedule.enable"
	// OpScheduleFire is the audit op of a firing (by its schedule, a
	// catch-up at start, or schedule.run); not a request.
	OpScheduleFire = "schedule.fire"
)

// Schedules that fire on messages instead of a clock: a run per message
// put into the agent's inbox, or a run per batch (one run at a time; the
// messages that came while it ran fire the next).
const (
	ScheduleMessage  = "@message"
	ScheduleMessages = "@messages"
)

// ScheduleEnableArgs are the args of schedule.enable.
type ScheduleEnableArgs struct {
	Name    string `json:"name"`
	Agent   string `json:"agent,omitempty"`
	Disable bool   `json:"disable,omitempty"`
}

// RecordJob is the record type of a scheduled job.
const RecordJob = "job"

// EBUSY is the result of a firing not run because the job's last run
// still runs (overlap skip), and the error of schedule.run then.
const EBUSY = "EBUSY"

// ScheduleAddArgs are the args of schedule.add. Command set: each firing
// runs it as ox-spawn -a AGENT -- COMMAND would; else Task is an LLM run.
type ScheduleAddArgs struct {
	Agent string `json:"agent"`
	Name  string `json:"name"`
	// Schedule is 5 cron fields or a descriptor (@hourly...).
	Schedule string `json:"schedule"`
	// TZ is an IANA time zone; "" is oxiosd's local zone.
	TZ       string   `json:"tz,omitempty"`
	Priority int      `json:"priority,omitempty"`
	Overlap  string   `json:"overlap,omitempty"` // skip (default), queue, allow
	CatchUp  bool     `json:"catch_up,omitempty"`
	Command  []string `json:"command,omitempty"`
	Task     string   `json:"task,omitempty"`
}

// ScheduleArgs name a job (schedule.rm, schedule.run). Agent, when given,
// must be the job's.
type ScheduleArgs struct {
	Name  string `json:"name"`
	Agent string `json:"agent,omitempty"`
}

// ScheduleListArgs are the args of schedule.list: the jobs of Agent, or
// every job the caller may see.
type ScheduleListArgs struct {
	Agent string `json:"agent,omitempty"`
}

// Job is a scheduled job as its file keeps it (agents/NAME/sys/
// schedules/JOB.json, package sched/jobs): the one definition of its
// fields, which its record (JobRecord) shows too.
type Job struct {
	Name      string    `json:"name"`
	Agent     string    `json:"agent"`
	Schedule  string    `json:"schedule"`
	TZ        string    `json:"tz,omitempty"`
	Priority  int       `json:"priority,omitempty"`
	Overlap   string    `json:"overlap"`
	CatchUp   bool      `json:"catch_up,omitempty"`
	Command   []string  `json:"command,omitempty"`
	Task      string    `json:"task,omitempty"`
	Created   time.Time `json:"created"`
	CreatedBy uint32    `json:"created_by"`
	// LastDue is the last due time handled (fired or skipped); LastFired
	// and LastRun the last firing and its run.
	LastDue   *time.Time `json:"last_due,omitempty"`
	LastFired *time.Time `json:"last_fired,omitempty"`
	LastRun   string     `json:"last_run,omitempty"`
	// Disabled: it does not fire until ox-schedule enable (a fork's copy
	// of a job is).
	Disabled bool `json:"disabled,omitempty"`
	// LastMsg is the last message a message job fired on.
	LastMsg string `json:"last_msg,omitempty"`
}

// JobRecord is the "job" record: a scheduled job and where it stands.
type JobRecord struct {
	Type string `json:"type"` // always "job"
	Job
	// Next is when it fires next (absent once removed).
	Next *time.Time `json:"next,omitempty"`
	// LastStatus is the exit status of the last run, once it exited and
	// while oxiosd keeps its record.
	LastStatus *int `json:"last_status,omitempty"`
	// Running is the id of the job's run while it runs; Pending says a
	// firing waits for it to end (overlap queue).
	Running string `json:"running,omitempty"`
	Pending bool   `json:"pending,omitempty"`
	// Run, Due and Fired are set on the event of a firing (the data of
	// schedule.fired): the run it started, the time it was due, and why it
	// fired: "schedule", "catch-up" (missed while oxiosd was down),
	// "queued" (after the last run ended) or "manual" (schedule.run).
	Run     string     `json:"run,omitempty"`
	Due     *time.Time `json:"due,omitempty"`
	Fired   string     `json:"fired,omitempty"`
	Deleted bool       `json:"deleted,omitempty"`
	Text    string     `json:"text"`
}
