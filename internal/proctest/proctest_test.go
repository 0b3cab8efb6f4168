package proctest

import "testing"

func TestBinaryName(t *testing.T) {
	for pkg, want := range map[string]string{Worker: "worker", NATSServer: "nats-server", GoFakeS3: "gofakes3"} {
		if got := binaryName(pkg); got != want {
			t.Errorf("binaryName(%s) = %s, want %s", pkg, got, want)
		}
	}
}
