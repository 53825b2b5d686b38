package storage

import (
	"io"
	"net"
	"os"
	"sync"

	"github.com/sluice-io/sluice/internal/vfs"
)

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// WriteTo writes the slice's bytes to w. When w is a *net.TCPConn and a
// chunk's file is an OS file, the chunk is sent with sendfile(2) at an
// explicit offset (no shared seek position, so concurrent readers of the
// same file are safe); otherwise it is copied with ReadAt through a pooled
// buffer.
func (s Slice) WriteTo(w io.Writer) (int64, error) {
	tcp, isTCP := w.(*net.TCPConn)
	var total int64
	var bufp *[]byte
	defer func() {
		if bufp != nil {
			copyBufs.Put(bufp)
		}
	}()
	for _, c := range s.Chunks {
		if isTCP && sendfileSupported {
			f, release, err := osFile(c.File)
			if err != nil {
				return total, err
			}
			if f != nil {
				n, err := sendfile(tcp, f, c.Pos, c.Len)
				release()
				total += n
				if err != nil {
					return total, err
				}
				continue
			}
		}
		if bufp == nil {
			bufp = copyBufs.Get().(*[]byte)
		}
		n, err := copyChunk(w, c, *bufp)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// osFile returns the operating-system file behind f, if any, held until
// release (a HandleCache file is pinned so it is not closed meanwhile).
func osFile(f vfs.File) (*os.File, func(), error) {
	switch f := f.(type) {
	case vfs.OSPinner:
		return f.PinOS()
	case vfs.OSFiler:
		return f.OSFile(), func() {}, nil
	}
	return nil, nil, nil
}
