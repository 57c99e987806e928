package audit_test

import (
	"encoding/json"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/audit"
)

// BenchmarkRecord is the work one record costs, off the call path: the
// arguments canonicalised and digested, the record encoded and checked
// (Conforms, as the publisher does; Validate, the schema walk it replaces).
func BenchmarkRecord(b *testing.B) {
	b.Run("SetArguments", func(b *testing.B) {
		r := sampleRecord(1)
		in := json.RawMessage(`{"message":"hi","upper":true,"count":3}`)
		b.ReportAllocs()
		for b.Loop() {
			r.SetArguments(in, false)
		}
	})
	data, err := json.Marshal(sampleRecord(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Marshal", func(b *testing.B) {
		r := sampleRecord(1)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Conforms", func(b *testing.B) {
		r := sampleRecord(1)
		b.ReportAllocs()
		for b.Loop() {
			if !audit.Conforms(r) {
				b.Fatal("sample record does not conform")
			}
		}
	})
	b.Run("Validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := audit.Validate(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
