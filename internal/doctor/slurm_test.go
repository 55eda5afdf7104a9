package doctor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

func TestSlurmStatus(t *testing.T) {
	withSrun := &probe.Facts{Slurm: &probe.Tool{Path: "/usr/bin/srun", Version: "22.05.8"}}
	if st := slurmStatus(&probe.Facts{}, nil, "vm"); st != nil {
		t.Errorf("no Slurm at all: %+v", st)
	}
	st := slurmStatus(withSrun, nil, "vm")
	if st == nil || !st.Found || st.Version != "22.05.8" || st.Job != nil || !strings.Contains(st.Launch, "--slurm") {
		t.Errorf("outside an allocation: %+v", st)
	}
	step := []string{"SLURM_JOB_ID=812", "SLURM_STEP_ID=0", "SLURMD_NODENAME=gpu02", "SLURM_JOB_NODELIST=gpu[01-02]",
		"SLURM_CPUS_ON_NODE=16", "SLURM_GPUS_ON_NODE=4", "SLURM_JOB_PARTITION=h200"}
	st = slurmStatus(withSrun, step, "gpu02")
	if st.Job == nil || st.Job.GPUs != 4 || st.Problem != "" || !strings.Contains(st.Launch, "srun") || !strings.Contains(st.Launch, "gpu02") {
		t.Errorf("in a step: %+v", st)
	}
	st = slurmStatus(withSrun, []string{"SLURM_JOB_ID=812", "SLURM_JOB_NODELIST=gpu[01-02]"}, "login1")
	if st.Problem == "" || !strings.Contains(st.Problem, "login1") || !strings.Contains(st.Launch, "refused") {
		t.Errorf("salloc shell on a login node: %+v", st)
	}
	st = slurmStatus(withSrun, append([]string{"MGPU_LEARN_SLURM=off"}, step...), "gpu02")
	if !st.Disabled || st.Problem != "" || !strings.Contains(st.Launch, "MGPU_LEARN_SLURM=off") {
		t.Errorf("opted out: %+v", st)
	}
	st = slurmStatus(&probe.Facts{}, step, "gpu02")
	if st.Found || !strings.Contains(st.Problem, "srun is not on PATH") {
		t.Errorf("allocation without srun: %+v", st)
	}
}

// doctor's screen and JSON in a step of a GPU job.
func TestSlurmInReport(t *testing.T) {
	m := probetest.New(t)
	m.Tool("srun", probetest.Case{Args: "--version", Out: "slurm 22.05.8\n"})
	for k, v := range map[string]string{"SLURM_JOB_ID": "812", "SLURM_STEP_ID": "0", "SLURMD_NODENAME": "gpu02",
		"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_CPUS_ON_NODE": "16", "SLURM_GPUS_ON_NODE": "4", "MGPU_LEARN_SLURM": ""} {
		t.Setenv(k, v)
	}
	r := Build(probeFake(t, m), testCourse())
	out := text(t, r)
	for _, want := range []string{"Slurm  inside job 812, step 0, on node gpu02: 16 CPUs, 4 GPUs allocated on this node",
		"checks: checks with more than one rank start them with srun, as a step of job 812 on node gpu02"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Slurm struct {
			Found   bool   `json:"found"`
			Version string `json:"version"`
			Launch  string `json:"launch"`
			Job     struct {
				JobID string `json:"job_id"`
				Node  string `json:"node"`
				GPUs  int    `json:"gpus"`
				CPUs  int    `json:"cpus"`
			} `json:"job"`
		} `json:"slurm"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Slurm
	if !s.Found || s.Version != "22.05.8" || s.Job.JobID != "812" || s.Job.Node != "gpu02" || s.Job.GPUs != 4 || s.Job.CPUs != 16 || s.Launch == "" {
		t.Errorf("JSON slurm = %+v", s)
	}
}
