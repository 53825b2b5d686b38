//go:build !linux

package storage

import (
	"errors"
	"net"
	"os"
)

const sendfileSupported = false

func sendfile(conn *net.TCPConn, f *os.File, pos, n int64) (int64, error) {
	return 0, errors.New("storage: sendfile not supported")
}
