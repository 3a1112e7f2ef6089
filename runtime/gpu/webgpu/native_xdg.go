//go:build linux || freebsd

package webgpu

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ensureRuntimeDir gives the process a private XDG_RUNTIME_DIR when it has
// none, before wgpu-native loads the Vulkan drivers. Mesa's drivers
// (lavapipe among them) probe Wayland as they start, and libwayland
// prints "XDG_RUNTIME_DIR is invalid or not set in the environment" to
// stderr for each probe when the variable is unset or not an absolute
// path, as it is outside a login session (CI, containers, cron, ssh
// without PAM): five lines on every WebGPU command. The default is
// $TMPDIR/tessera-xdg-UID, created 0700 and used only if it is a real
// directory of ours with no access for anyone else; otherwise a fresh
// private directory is made. A variable that is set is left alone.
func ensureRuntimeDir() {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return
	}
	dir, err := privateDir(filepath.Join(os.TempDir(), fmt.Sprintf("tessera-xdg-%d", os.Getuid())))
	if err != nil {
		if dir, err = os.MkdirTemp("", "tessera-xdg-"); err != nil {
			return // the drivers only print their warning
		}
	}
	os.Setenv("XDG_RUNTIME_DIR", dir) // with cgo this sets the C environment too
}

// privateDir creates dir with mode 0700 if it does not exist and returns
// it if it is a directory (not a link) that this user owns and nobody else
// may enter.
func privateDir(dir string) (string, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return "", fmt.Errorf("%s is not a directory", dir)
	case !ok || int(sys.Uid) != os.Getuid():
		return "", fmt.Errorf("%s belongs to someone else", dir)
	case st.Mode().Perm() != 0o700:
		// Ours, but the umask or someone widened it: narrow it again.
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}
