package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate is a rate limit as the policy writes it: "N/s", "N/m" or "N/h",
// N calls per second, minute or hour. It is a token bucket of N calls
// refilled evenly over the period, so a caller may spend all N at once
// and then one more each period/N.
type Rate struct {
	// Calls is N; zero is no limit.
	Calls int
	// Per is the period, a second, a minute or an hour.
	Per time.Duration
}

// ratePeriods are the periods a rate may name.
var ratePeriods = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRate parses "N/s", "N/m" or "N/h" with N at least 1.
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	per, known := ratePeriods[unit]
	calls, err := strconv.Atoi(n)
	if !ok || !known || err != nil || calls < 1 || calls > 1_000_000 {
		return Rate{}, fmt.Errorf("%q is not a rate: write N/s, N/m or N/h with N from 1 to 1000000, such as 60/m", s)
	}
	return Rate{Calls: calls, Per: per}, nil
}

// MustRate is [ParseRate] for a rate that has passed validation.
func MustRate(s string) Rate {
	if s == "" {
		return Rate{}
	}
	r, err := ParseRate(s)
	if err != nil {
		panic(err)
	}
	return r
}

// Unlimited reports whether r limits nothing.
func (r Rate) Unlimited() bool { return r.Calls <= 0 || r.Per <= 0 }

// PerSecond is the refill rate of r's bucket.
func (r Rate) PerSecond() float64 { return float64(r.Calls) / r.Per.Seconds() }

// More reports whether r allows more calls over time than o; an
// unlimited rate allows the most.
func (r Rate) More(o Rate) bool {
	switch {
	case r.Unlimited():
		return !o.Unlimited()
	case o.Unlimited():
		return false
	}
	return r.PerSecond() > o.PerSecond() || r.PerSecond() == o.PerSecond() && r.Calls > o.Calls
}

func (r Rate) String() string {
	if r.Unlimited() {
		return "unlimited"
	}
	for unit, per := range ratePeriods {
		if per == r.Per {
			return strconv.Itoa(r.Calls) + "/" + unit
		}
	}
	return fmt.Sprintf("%d/%s", r.Calls, r.Per)
}
