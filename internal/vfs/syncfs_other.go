//go:build !linux

package vfs

// syncFSOf: only Linux has syncfs(2).
func (osFS) syncFSOf(string) (FSSyncer, error) { return nil, nil }
