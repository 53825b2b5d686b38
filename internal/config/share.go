package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// checkShareAssignors accepts Kafka's only share-group assignor, simple,
// by name or class name (group.share.assignors lists exactly one).
func checkShareAssignors(v string) error {
	parts := strings.Split(v, ",")
	if len(parts) != 1 {
		return fmt.Errorf("exactly one share group assignor is supported")
	}
	switch strings.TrimSpace(parts[0]) {
	case "simple", "org.apache.kafka.coordinator.group.assignor.SimpleAssignor":
		return nil
	}
	return fmt.Errorf("the only share group assignor is simple")
}

// isoDuration is the form of Java's Duration.parse without signs (a
// negative duration is refused): PnDTnHnMn.nS, case-insensitive.
var isoDuration = regexp.MustCompile(`(?i)^P(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// ShareAutoOffsetReset is a parsed share.auto.offset.reset: Kind is
// earliest, latest or by_duration, with Duration for the last.
type ShareAutoOffsetReset struct {
	Kind     string
	Duration time.Duration
}

// ParseShareAutoOffsetReset reads a share.auto.offset.reset value as
// Kafka's ShareGroupAutoOffsetResetStrategy: earliest, latest, or
// by_duration: followed by a non-negative ISO-8601 duration (P1D,
// PT1H30M, PT0.5S).
func ParseShareAutoOffsetReset(v string) (ShareAutoOffsetReset, error) {
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "earliest", "latest":
		return ShareAutoOffsetReset{Kind: strings.ToLower(v)}, nil
	}
	const prefix = "by_duration:"
	if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return ShareAutoOffsetReset{}, fmt.Errorf("expected earliest, latest or by_duration:<ISO-8601 duration>")
	}
	m := isoDuration.FindStringSubmatch(v[len(prefix):])
	if m == nil || strings.EqualFold(v[len(prefix):], "P") || strings.HasSuffix(strings.ToUpper(v), "T") {
		return ShareAutoOffsetReset{}, fmt.Errorf("by_duration needs an ISO-8601 duration such as PT1H or P1DT12H (non-negative)")
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(1<<63-1)/int64(unit) {
			return ShareAutoOffsetReset{}, fmt.Errorf("by_duration: duration too long")
		}
		d += time.Duration(n) * unit
	}
	if frac := m[5]; frac != "" {
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		d += time.Duration(ns)
	}
	if d < 0 {
		return ShareAutoOffsetReset{}, fmt.Errorf("by_duration: duration too long")
	}
	return ShareAutoOffsetReset{Kind: "by_duration", Duration: d}, nil
}

func checkShareAutoOffsetReset(v string) error {
	_, err := ParseShareAutoOffsetReset(v)
	return err
}
