// Package podlogs tails the container log files the kubelet keeps under
// /var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log and turns their
// CRI-format lines into whole log lines, each with the position to persist
// once the line was shipped.
//
// # Discovery and filters
//
// A Tailer lists the root directory every Config.RescanInterval. Pod
// directories whose namespace or pod name the filters reject are never
// opened. Every file whose name ends in ".log" in a container directory is
// tailed; rotated files ("0.log.20240102-030405", "….gz") are not discovered
// as files of their own.
//
// # Positions
//
// Every Entry carries its path and a position (inode and offset): where to
// resume once that entry (and all before it) was acknowledged. Store
// it in state.File.Pods[Path] and pass that map back as Config.Start on the
// next run. For a file whose lines are whole ("F") or whose partial ("P")
// runs do not interleave across stdout and stderr, resuming at an entry's
// offset replays nothing and skips nothing: the offset of a joined line is
// the end of its final ("F") CRI line, and a partial run never moves the
// offset before its F line is read.
//
// When a partial run on one stream is still open while a line on the other
// stream completes (a long stdout line split by the runtime, with a stderr
// line written between its parts), no single offset can describe "that
// stderr line is done but the start of the stdout line is not". The offset
// then stays at the start of the open run, so a restart at that point
// delivers the stderr line again rather than losing the head of the stdout
// line: at least once, never a loss.
//
// A path's entries arrive in file order, all of a rotated file's before any
// of its successor's, so the last acknowledged entry of a path is its
// position. Incomplete lines delivered because the file was truncated carry
// offset 0: the truncated bytes are gone, what follows starts at 0.
//
// # Rotation and truncation
//
// The kubelet rotates a container log by renaming n.log to
// n.log.<timestamp> and asking the runtime to reopen n.log. A Tailer notices
// the new inode behind the path when the file it reads is at its end, keeps
// reading the old file through its open descriptor until it stays at its end
// for one more poll interval (lines the runtime wrote before it reopened are
// not lost), then reads the new file from offset 0. A file that shrinks below
// the read position (copytruncate) is read again from offset 0.
//
// On start, a stored position whose inode no longer matches the file at the
// path means the file was rotated while nothing read it. The current file is
// then read from offset 0; if an uncompressed rotated sibling n.log.<suffix>
// with the stored inode still exists, the rest of it is read first, from the
// stored offset (best effort: the kubelet compresses rotated files, after
// which their tail is lost and Stats.Unrecovered counts it). A stored offset
// that does not follow a newline in the file with the stored inode is not
// trusted either (the inode number was reused by a new file): that file is
// read from offset 0.
//
// Inode numbers come from stat(2); on systems without them (not Unix)
// rotation by rename goes unnoticed and stored positions are never trusted.
package podlogs
