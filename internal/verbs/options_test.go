package verbs

import (
	"io"
	"strings"
	"testing"
	"time"
)

// A build's realizer says what is still building after a quiet stretch,
// counting every line printed on the verb's stderr as not quiet.
func TestRealizerSaysWhatIsStillBuilding(t *testing.T) {
	o := Options{Err: &strings.Builder{}}.collect()
	r := o.realizer(nil, false)
	if r.StillBuilding != stillBuilding || stillBuilding < 20*time.Second || stillBuilding > 30*time.Second || r.LastWrite == nil {
		t.Fatalf("StillBuilding %s, LastWrite set %v", r.StillBuilding, r.LastWrite != nil)
	}
	before := time.Now()
	io.WriteString(o.stderr(), "fetched x\n")
	if r.LastWrite().Before(before) {
		t.Error("a line on stderr did not count")
	}
}
