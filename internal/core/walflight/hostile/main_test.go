package hostile

import (
	"testing"

	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

// walctlBin is the walctl binary built once by TestMain.
var walctlBin string

func TestMain(m *testing.M) { walctlbin.Main(m, &walctlBin) }
