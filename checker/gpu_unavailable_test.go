package checker

import (
	"strings"
	"testing"
)

// A harness or driver call that finds the GPU taken (exclusive mode, MPS) is the machine's
// state: the verdict is refused with a sentence saying what to look at, never "a bug in the
// runner" and never the learner's failure; the learner's own calls stay the learner's.
func TestErrorFaultGPUUnavailable(t *testing.T) {
	cases := []struct {
		name       string
		er         record
		fault, has string
	}{
		{"harness, exclusive mode", record{Where: "harness", Call: "cudaSetDevice(ctx->device)", Code: 46,
			Msg: "cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable"}, FaultMachine, "exclusive-process mode"},
		{"harness, MPS", record{Where: "harness", Call: "cudaGetDeviceCount", Code: 805,
			Msg: "cudaErrorMpsConnectionFailed: MPS client failed to connect to the MPS control daemon or the MPS server"}, FaultMachine, "Multi-Process Service"},
		{"python driver, busy", record{Where: "driver", Call: "RuntimeError",
			Msg: "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"}, FaultMachine, "busy or unavailable"},
		{"harness, no device", record{Where: "harness", Call: "cudaGetDeviceCount", Code: 100,
			Msg: "cudaErrorNoDevice: no CUDA-capable device is detected"}, FaultMachine, "doctor --refresh"},
		{"learner's own call", record{Where: "learner", Call: "cudaMalloc", Code: 46,
			Msg: "cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable"}, FaultYou, "your code"},
		{"driver, illegal address", record{Where: "driver", Call: "cudaStreamSynchronize", Code: 700,
			Msg: "cudaErrorIllegalAddress: an illegal memory access was encountered"}, FaultYou, "out of bounds"},
		{"harness, other error", record{Where: "harness", Call: "cudaMalloc", Code: 2,
			Msg: "cudaErrorMemoryAllocation: out of memory"}, FaultRunner, ""},
	}
	for _, c := range cases {
		fault, why := errorFault(c.er)
		if fault != c.fault || !strings.Contains(why, c.has) {
			t.Errorf("%s: fault %q, sentence %q; want %q with %q", c.name, fault, why, c.fault, c.has)
		}
	}
}
