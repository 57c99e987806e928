package audit

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// DefaultSpoolMax bounds a spool's bytes when [PublisherConfig.SpoolMax]
// is zero: some 64 thousand records of 1 KiB, hours of a busy service's
// calls while the bus is away.
const DefaultSpoolMax = 64 << 20

// maxSpoolSlots bounds the slots of one spool directory: one per process
// of a service and identity running at once.
const maxSpoolSlots = 64

// spool keeps, on disk and in order, the records a publisher could not
// publish, until they are. Each record is one file, written to a
// temporary name, synced and renamed, so a crash leaves either the whole
// record or none of it; the file name is its sequence number, so order
// survives a restart. A spool directory holds one slot per process that
// uses it at once (slot-N, held by an exclusive lock), so the processes of
// one identity share a configured directory and a restarted process takes
// over, and replays, what one before it left.
//
// A spool is used by its publisher's goroutine only.
type spool struct {
	dir  string // the slot's directory
	lock *os.File
	max  int64
	log  *slog.Logger

	files []spooled // oldest first
	bytes int64
	next  uint64

	// dropped counts records refused because the spool was full.
	dropped atomic.Uint64
	// held mirrors len(files), for Spooled.
	held atomic.Int64
}

type spooled struct {
	path string
	size int64
}

// recordSuffix names a spooled record's file; tmpSuffix one being written.
const (
	recordSuffix = ".rec"
	tmpSuffix    = ".tmp"
)

// openSpool takes the first free slot of dir and loads what an earlier
// process left in it.
func openSpool(dir string, max int64, log *slog.Logger) (*spool, error) {
	if max <= 0 {
		max = DefaultSpoolMax
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	for i := range maxSpoolSlots {
		slot := filepath.Join(dir, "slot-"+strconv.Itoa(i))
		if err := os.MkdirAll(slot, 0o700); err != nil {
			return nil, fmt.Errorf("audit spool: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(slot, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit spool: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return nil, fmt.Errorf("audit spool: locking %s: %w", slot, err)
		}
		s := &spool{dir: slot, lock: f, max: max, log: log}
		if err := s.load(); err != nil {
			s.close()
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("audit spool: all %d slots of %s are held by running processes", maxSpoolSlots, dir)
}

// load lists the slot's records, oldest first, and removes what a crash
// left half written.
func (s *spool) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("audit spool: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			s.log.Warn("audit spool: removing a record a crash left half written", "file", filepath.Join(s.dir, name))
			_ = os.Remove(filepath.Join(s.dir, name))
		case strings.HasSuffix(name, recordSuffix):
			seq, err := strconv.ParseUint(strings.TrimSuffix(name, recordSuffix), 10, 64)
			info, ierr := e.Info()
			if err != nil || ierr != nil {
				s.log.Error("audit spool: skipping a file that is not a spooled record", "file", filepath.Join(s.dir, name))
				continue
			}
			s.files = append(s.files, spooled{path: filepath.Join(s.dir, name), size: info.Size()})
			s.bytes += info.Size()
			s.next = max(s.next, seq+1)
		}
	}
	slices.SortFunc(s.files, func(a, b spooled) int { return strings.Compare(a.path, b.path) })
	s.held.Store(int64(len(s.files)))
	if len(s.files) > 0 {
		s.log.Info("audit spool: records of an earlier run to publish", "dir", s.dir, "records", len(s.files), "bytes", s.bytes)
	}
	return nil
}

// add writes one record (its message id and data) behind the others. A
// record that would take the spool past its bound is refused, and the
// oldest kept: they are the ones a trail is missing first.
func (s *spool) add(id string, data []byte) error {
	body := make([]byte, 0, len(id)+1+len(data))
	body = append(append(append(body, id...), '\n'), data...)
	if s.bytes+int64(len(body)) > s.max {
		s.dropped.Add(1)
		return fmt.Errorf("the audit spool %s is full (%d bytes of audit.spool_max %d)", s.dir, s.bytes, s.max)
	}
	// Zero-padded, so names sort as numbers.
	name := filepath.Join(s.dir, fmt.Sprintf("%020d%s", s.next, recordSuffix))
	tmp := name + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	s.next++
	s.files = append(s.files, spooled{path: name, size: int64(len(body))})
	s.bytes += int64(len(body))
	s.held.Store(int64(len(s.files)))
	return nil
}

// peek returns the oldest record, or ok false for none. A file that
// cannot be read or holds no record is dropped with an error log, so one
// damaged file never stops the replay behind it.
func (s *spool) peek() (id string, data []byte, ok bool) {
	for len(s.files) > 0 {
		b, err := os.ReadFile(s.files[0].path)
		i := bytes.IndexByte(b, '\n')
		if err == nil && i > 0 && i < len(b)-1 {
			return string(b[:i]), b[i+1:], true
		}
		s.log.Error("audit spool: dropping a damaged spooled record", "file", s.files[0].path, "error", err, "bytes", len(b))
		s.pop()
	}
	return "", nil, false
}

// pop removes the oldest record, once it is published.
func (s *spool) pop() {
	f := s.files[0]
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("audit spool: removing a published record", "file", f.path, "error", err)
	}
	s.files = s.files[1:]
	s.bytes -= f.size
	s.held.Store(int64(len(s.files)))
}

func (s *spool) empty() bool { return len(s.files) == 0 }

func (s *spool) close() {
	if s.lock != nil {
		_ = s.lock.Close()
	}
}
