package embedtest

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

func TestExitStatus(t *testing.T) {
	t.Run("stop exits cleanly", func(t *testing.T) {
		s := Start(t)
		s.Stop()
		if s.waitErr != nil {
			t.Errorf("after Stop: got %v, want exit status 0", s.waitErr)
		}
	})
	t.Run("kill", func(t *testing.T) {
		s := Start(t)
		s.Kill()
		var ee *exec.ExitError
		if !errors.As(s.waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("after Kill: got %v, want killed by SIGKILL", s.waitErr)
		}
	})
}

func TestListenWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string // "" when no URL may be sent
	}{
		{"one write", []string{"listening http://127.0.0.1:1234/v1\n"}, "http://127.0.0.1:1234/v1"},
		{"split line", []string{"listen", "ing http://127.0.0.1:1", "234/v1\n"}, "http://127.0.0.1:1234/v1"},
		{"after other output", []string{"warming up\nlistening http://127.0.0.1:5/v1\n"}, "http://127.0.0.1:5/v1"},
		{"line not ended", []string{"listening http://127.0.0.1:1234/v1"}, ""},
		{"no listening line", []string{"loading\n", "still loading\n"}, ""},
		{"first line wins", []string{"listening http://127.0.0.1:1/v1\nlistening http://127.0.0.1:2/v1\n"}, "http://127.0.0.1:1/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &listenWriter{ready: make(chan string, 1)}
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q): got %d, %v, want %d, nil", s, n, err, len(s))
				}
			}
			var got string
			select {
			case got = <-w.ready:
			default:
			}
			if got != tt.want {
				t.Errorf("got URL %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8090/v1", true},
		{"http://127.0.0.1:8090/", false},
		{"http://127.0.0.1/v1", false},
		{"http://0.0.0.0:8090/v1", false},
		{"https://127.0.0.1:8090/v1", false},
		{"http://[::1]:8090/v1", false},
		{"::", false},
	}
	for _, tt := range tests {
		if err := checkURL(tt.url); (err == nil) != tt.ok {
			t.Errorf("checkURL(%q): got %v, want ok %v", tt.url, err, tt.ok)
		}
	}
}
