//go:build linux

package storage

import (
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

const sendfileSupported = true

// maxSendfile bounds one sendfile call (Linux caps it near 2 GiB).
const maxSendfile = 1 << 30

// sendfile sends n bytes of f at pos to conn with sendfile(2), waiting on
// the network poller when the socket buffer is full (so the connection's
// write deadline applies). It uses an explicit offset and never moves f's
// seek position.
func sendfile(conn *net.TCPConn, f *os.File, pos, n int64) (int64, error) {
	out, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	in, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var serr error
	cerr := in.Control(func(infd uintptr) {
		werr := out.Write(func(outfd uintptr) bool {
			for written < n {
				off := pos + written
				m, err := unix.Sendfile(int(outfd), int(infd), &off, int(min(n-written, maxSendfile)))
				if m > 0 {
					written += int64(m)
				}
				switch {
				case err == unix.EAGAIN:
					return false // wait until writable
				case err == unix.EINTR:
					continue
				case err != nil:
					serr = os.NewSyscallError("sendfile", err)
					return true
				case m == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than the chunk
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	return written, serr
}
