package handler

import "testing"

// TestValidUUID: member ids as Kafka's Uuid.fromString reads them, padded
// (franz-go's member ids) or not (the Java client's).
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
		"AAAAAAAAAAAAAAAAAAAA+/==":   false,
		"00000000-0000-0000-0000-00": false,
	} {
		if got := validUUID(s); got != want {
			t.Errorf("validUUID(%q) = %v, want %v", s, got, want)
		}
	}
}
