package handler

import "testing"

// TestValidUUID: member ids in base64, padded
// (franz-go) or not (the Java client), URL-safe (Kafka) or standard (librdkafka).
func TestValidUUID(t *testing.T) {
	for s, want := range map[string]bool{
		"AAAAAAAAAAAAAAAAAAAAAA":     true,
		"AAAAAAAAAAAAAAAAAAAAAA==":   true,
		"q-_aZZZZZZZZZZZZZZZZZw":     true,
		"":                           false,
		"not-a-uuid":                 false,
		"AAAAAAAAAAAAAAAAAAAAAAA":    false,
		"AAAAAAAAAAAAAAAAAAAAAA=":    false,
		"AAAAAAAAAAAAAAAAAAAAAAAA":   false,
		"AAAAAAAAAAAAAAAAAAAAAA===":  false,
		"AAAAAAAAAAAAAAAAAAAA+/==":   true,  // librdkafka's standard alphabet
		"AAAAAAAAAAAAAAAAAAA-+A==":   false, // both alphabets at once
		"00000000-0000-0000-0000-00": false,
	} {
		if got := validUUID(s); got != want {
			t.Errorf("validUUID(%q) = %v, want %v", s, got, want)
		}
	}
}
