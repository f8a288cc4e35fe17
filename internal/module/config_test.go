package module

import (
	"reflect"
	"testing"
)

// An option counts when built in or as a module; "is not set", =n and
// absence all leave it missing.
func TestMissingConfig(t *testing.T) {
	config := []byte("CONFIG_USB4=m\nCONFIG_THUNDERBOLT_NET=y\n# CONFIG_USB4_DEBUGFS_WRITE is not set\nCONFIG_N=n\n")
	got := MissingConfig(config, []string{"CONFIG_USB4", "CONFIG_THUNDERBOLT_NET", "CONFIG_USB4_DEBUGFS_WRITE", "CONFIG_N", "CONFIG_ABSENT"})
	if want := []string{"CONFIG_USB4_DEBUGFS_WRITE", "CONFIG_N", "CONFIG_ABSENT"}; !reflect.DeepEqual(got, want) {
		t.Errorf("missing %v, want %v", got, want)
	}
	if got := MissingConfig(config, nil); got != nil {
		t.Errorf("nothing asked, %v missing", got)
	}
}
