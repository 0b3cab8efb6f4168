package lance

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// namingScheme is how a dataset names its manifest files.
type namingScheme int

const (
	// namingV2 names version n "{u64::MAX - n}" zero-padded to 20 digits, so a lexical listing
	// returns the newest first. New datasets use it.
	namingV2 namingScheme = iota
	// namingV1 names version n "{n}.manifest"; read, and continued on datasets that use it.
	namingV1
)

const versionsDir = "_versions/"

func manifestKey(s namingScheme, v uint64) string {
	if s == namingV1 {
		return fmt.Sprintf("%s%d.manifest", versionsDir, v)
	}
	return fmt.Sprintf("%s%020d.manifest", versionsDir, uint64(math.MaxUint64)-v)
}

// parseManifestName returns the version a file name in _versions/ stands for. Names that are not
// manifests (hint file, temp files, detached versions) report ok=false.
func parseManifestName(name string) (v uint64, s namingScheme, ok bool) {
	if !strings.HasSuffix(name, ".manifest") || strings.HasPrefix(name, "d") {
		return 0, 0, false
	}
	num := strings.TrimSuffix(name, ".manifest")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(name) == 29 {
		return math.MaxUint64 - n, namingV2, true
	}
	return n, namingV1, true
}
