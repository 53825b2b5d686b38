// Package firsthour holds real-process tests of what a new user meets in
// the first hour: strict configuration, shutdown, `sluice dev`.
package firsthour

import (
	"testing"

	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }
