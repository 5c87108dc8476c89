// Package kmsg parses and reads the kernel log as exposed by /dev/kmsg.
//
// Each /dev/kmsg record looks like
//
//	<faclev>,<seq>,<usec>,<flags>[,<more fields>];<message>\n
//	[ <KEY>=<value>\n]...
//
// faclev packs the syslog facility and level (facility<<3 | level), seq is a
// 64-bit sequence number, usec the printk timestamp in microseconds since
// boot, and flags is '-' for a normal record or 'c' for a continuation
// fragment ('+' marked the following fragments on kernels before 4.10). Extra
// header fields such as "caller=T123" may follow the flags. The message runs
// from the first ';' to the end of the first line; dictionary lines that start
// with a single space follow it. The kernel escapes non-printable bytes and the
// backslash as \xHH in both message and dictionary; Parse undoes that.
//
// Parse decodes a single record. Reader reads records from the /dev/kmsg
// device (one record per read) or from a regular file or FIFO holding records
// in the same format one after another, and accounts for every record it
// could not deliver: ring-buffer overruns, sequence gaps and malformed input.
package kmsg

import (
	"strconv"
	"time"
)

// Level is a syslog severity level, 0 (emerg) to 7 (debug).
type Level uint8

// Syslog levels.
const (
	LevelEmerg Level = iota
	LevelAlert
	LevelCrit
	LevelErr
	LevelWarn
	LevelNotice
	LevelInfo
	LevelDebug
)

// levelNames are the names util-linux dmesg prints (dmesg --decode).
var levelNames = [8]string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

// String returns the level's name as dmesg prints it ("emerg" ... "debug"),
// or its number for values above 7.
func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return strconv.Itoa(int(l))
}

// Facility is a syslog facility. The kernel logs with FacilityKern; records
// written to /dev/kmsg by user space default to FacilityUser.
type Facility uint8

// Syslog facilities.
const (
	FacilityKern Facility = iota
	FacilityUser
	FacilityMail
	FacilityDaemon
	FacilityAuth
	FacilitySyslog
	FacilityLpr
	FacilityNews
	FacilityUUCP
	FacilityCron
	FacilityAuthpriv
	FacilityFTP
	FacilityRes0
	FacilityRes1
	FacilityRes2
	FacilityRes3
	FacilityLocal0
	FacilityLocal1
	FacilityLocal2
	FacilityLocal3
	FacilityLocal4
	FacilityLocal5
	FacilityLocal6
	FacilityLocal7
)

// facilityNames are the names util-linux dmesg prints (dmesg --decode).
var facilityNames = [...]string{
	"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news",
	"uucp", "cron", "authpriv", "ftp", "res0", "res1", "res2", "res3",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
}

// String returns the facility's name as dmesg prints it ("kern", "user",
// "daemon", ..., "local7"), or its number for values above 23.
func (f Facility) String() string {
	if int(f) < len(facilityNames) {
		return facilityNames[f]
	}
	return strconv.Itoa(int(f))
}

// Flags values the kernel uses in the fourth header field.
const (
	// FlagsNone marks an ordinary, complete record.
	FlagsNone = "-"
	// FlagsCont marks a fragment of a continuation line. On kernels since
	// 4.10 every fragment after the first piece of the line carries it; on
	// older kernels it marks the first fragment and the following ones carry
	// FlagsFollows.
	FlagsCont = "c"
	// FlagsFollows marks a fragment that follows a FlagsCont fragment
	// (kernels before 4.10 only).
	FlagsFollows = "+"
)

// DictEntry is one dictionary line of a record, e.g. SUBSYSTEM=pci.
type DictEntry struct {
	Key   string
	Value string
}

// Record is one decoded /dev/kmsg record.
type Record struct {
	// Level and Facility are decoded from the first header field
	// (faclev = Facility<<3 | Level).
	Level    Level
	Facility Facility
	// Seq is the kernel's sequence number. It increases by one per record
	// within a boot; a larger step means records were lost.
	Seq uint64
	// LastSeq is the sequence number of the last kernel record folded into
	// this one. It equals Seq unless Reader merged continuation fragments
	// into this record. A reader's position should be persisted as LastSeq.
	LastSeq uint64
	// Monotonic is the printk timestamp: time since boot, microsecond
	// resolution.
	Monotonic time.Duration
	// Flags is the raw flags field: FlagsNone, FlagsCont or FlagsFollows.
	Flags string
	// Caller is the value of a "caller=" header field, such as "T123" (task
	// id) or "C2" (CPU id); empty when absent.
	Caller string
	// Fields holds any other header fields after the flags, in order and
	// verbatim. Current kernels emit none.
	Fields []string
	// Message is the text after the first ';' up to the end of the first
	// line, with \xHH escapes decoded. It may contain any byte, including
	// invalid UTF-8.
	Message string
	// Dict holds the dictionary lines in order, with \xHH escapes decoded.
	// Nil when the record has none.
	Dict []DictEntry
	// Time is the wall-clock time of the record, boot time + Monotonic.
	// Parse leaves it zero; Reader sets it when it knows the boot time.
	Time time.Time
}
