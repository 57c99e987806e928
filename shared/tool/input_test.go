package tool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestObjectInput(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "", want: ""},
		{in: "null", want: ""},
		{in: " \n null \t", want: ""},
		{in: "{}", want: "{}"},
		{in: ` {"a":1} `, want: `{"a":1}`},
		{in: "[]", wantErr: "got an array"},
		{in: `"x"`, wantErr: "got a string"},
		{in: "3", wantErr: "got a number"},
		{in: "true", wantErr: "got a boolean"},
		{in: "nul", wantErr: "got invalid JSON"},
		{in: "{} {}", wantErr: "got invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ObjectInput(json.RawMessage(tt.in))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInputNotObject) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v, want ErrInputNotObject saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}
