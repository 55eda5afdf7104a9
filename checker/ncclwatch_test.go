package checker

import (
	"strings"
	"testing"
)

const watchManifest = `id: module0/ex
title: Fake
kind: cuda
task: task.md
files: [a.c]
driver: driver.c
build:
  libs: [nccl]
launch:
  launcher: local
  ranks: "2"
requires:
  gpus: 2
  libs: [nvcc, nccl]
cases:
  - {name: small, n: 8}
timeout: 5s
forbid:
  - symbol: ncclAlltoAll
    why: "not watched: NCCL reports it as Send and Recv"
  - symbol: ncclBcast
    why: "the older name"
  - symbol: ncclAllReduce
    why: "the exercise is to build it yourself"
starter:
  fails_at: correctness
`

// TestCheckWatch judges done records with NCCL's watch counts (the "nccl" object the harness
// copies from mgpu_ncclwatch.c) as the run stage does.
func TestCheckWatch(t *testing.T) {
	ex := loadFake(t, watchManifest)
	const done = `{"t":"done","rank":%d,"summary":{"records":1,"cases":0,"checked":0,"timing_samples":0,"handed":0}%s}`
	clean := `,"nccl":{"env_ok":1,"comms":1,"finalized":1,"max_ranks":2,"mask_ok":1,"windows":3,"own":{"AllReduce":3},"learner":{"Send":8,"Recv":8}}`
	for _, tc := range []struct {
		name      string
		nccl      [2]string // rank 0's and rank 1's
		verdict   string
		fault     string
		headline  []string
		violation string
	}{
		{"clean", [2]string{clean, clean}, Passed, "", nil, ""},
		{"learner all-reduce", [2]string{clean, `,"nccl":{"env_ok":1,"comms":1,"max_ranks":2,"mask_ok":1,"windows":3,"own":{"AllReduce":3},"learner":{"AllReduce":12,"Send":2}}`},
			Failed, FaultYou, []string{"ncclAllReduce 12 time(s)", "reported by NCCL"}, "ncclAllReduce"},
		{"broadcast under its older name", [2]string{`,"nccl":{"env_ok":1,"comms":1,"max_ranks":2,"mask_ok":1,"windows":1,"own":{"AllReduce":1},"learner":{"Broadcast":1}}`, clean},
			Failed, FaultYou, []string{"ncclBcast 1 time(s)"}, "ncclBcast"},
		{"a collective the manifest allows", [2]string{`,"nccl":{"env_ok":1,"comms":1,"max_ranks":2,"mask_ok":1,"windows":1,"own":{"AllReduce":1},"learner":{"AllGather":5,"ReduceScatter":5}}`, clean},
			Passed, "", nil, ""},
		{"driver's calls unseen", [2]string{clean, `,"nccl":{"env_ok":1,"comms":1,"max_ranks":2,"mask_ok":1,"windows":3,"own":{},"learner":{}}`},
			Failed, FaultYou, []string{"blind", "rank 1"}, "NCCL watch"},
		{"one rank: NCCL reports nothing", [2]string{`,"nccl":{"env_ok":1,"comms":1,"max_ranks":1,"mask_ok":1,"windows":3,"own":{},"learner":{}}`, `,"nccl":{"env_ok":1,"comms":1,"max_ranks":1,"mask_ok":1,"windows":3,"own":{},"learner":{}}`},
			Passed, "", nil, ""},
		{"mask cleared", [2]string{`,"nccl":{"env_ok":1,"comms":1,"max_ranks":2,"mask_ok":0,"windows":0,"own":{},"learner":{}}`, clean},
			Failed, FaultYou, []string{"blind", "rank 0"}, "NCCL watch"},
		{"no communicator with the plugin, driver calls made", [2]string{clean, `,"nccl":{"env_ok":1,"comms":0,"max_ranks":0,"mask_ok":0,"windows":3,"own":{},"learner":{}}`},
			Failed, FaultYou, []string{"blind", "rank 1"}, "NCCL watch"},
		{"no communicator at all (timing off)", [2]string{`,"nccl":{"env_ok":1,"comms":0,"max_ranks":0,"mask_ok":0,"windows":0,"own":{},"learner":{}}`, clean},
			Passed, "", nil, ""},
		{"environment changed", [2]string{clean, `,"nccl":{"env_ok":0,"comms":1,"max_ranks":2,"mask_ok":1,"windows":3,"own":{"AllReduce":3},"learner":{}}`},
			Failed, FaultYou, []string{"blind", "rank 1"}, "NCCL watch"},
		{"forbidden call wins over a changed environment", [2]string{clean, `,"nccl":{"env_ok":0,"comms":1,"max_ranks":2,"mask_ok":1,"windows":3,"own":{"AllReduce":3},"learner":{"AllReduce":4}}`},
			Failed, FaultYou, []string{"ncclAllReduce 4 time(s)"}, "ncclAllReduce"},
		{"no counts", [2]string{clean, ""}, Errored, FaultRunner, []string{"no report from NCCL's watch"}, ""},
		{"counts too long", [2]string{clean, `,"nccl":{"error":"the watch's counts do not fit"}`}, Errored, FaultRunner, []string{"do not fit"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Checker{}
			k := c.newCheck(Target{Exercise: ex, Files: map[string]string{"a.c": "/w/a.c"}, Root: "/w"}, nil)
			rr := &runResult{}
			for r := 0; r < 2; r++ {
				line := strings.Replace(strings.Replace(done, "%d", string(rune('0'+r)), 1), "%s", tc.nccl[r], 1)
				start := `{"t":"start","rank":` + string(rune('0'+r)) + `,"world":2,"harness":"c/1"}`
				recs, err := parseRecords(strings.NewReader(start+"\n"+line+"\n"), "rank.jsonl", r)
				if err != nil {
					t.Fatal(err)
				}
				rr.records = append(rr.records, recs)
			}
			ok := k.checkWatch(rr, "/cache/watch.so")
			if ok != (tc.verdict == Passed) || k.rep.Verdict != tc.verdict || k.rep.Fault != tc.fault {
				t.Fatalf("ok %v, verdict %s, fault %q; want %s, %q\n%s\n%s", ok, k.rep.Verdict, k.rep.Fault, tc.verdict, tc.fault, k.rep.Headline, k.rep.Message)
			}
			for _, h := range tc.headline {
				if !strings.Contains(k.rep.Headline, h) {
					t.Errorf("headline %q lacks %q", k.rep.Headline, h)
				}
			}
			if tc.violation != "" {
				if len(k.rep.Policy) == 0 || k.rep.Policy[0].Symbol != tc.violation {
					t.Errorf("policy violations %+v; want %s", k.rep.Policy, tc.violation)
				}
				if tc.violation != "NCCL watch" && !strings.Contains(k.rep.Message, "a.c") {
					t.Errorf("the message does not name the learner's file:\n%s", k.rep.Message)
				}
			}
			if tc.name == "clean" {
				want := "NCCL's record of the calls your code made on rank 0 (the driver's own not counted): 8 ncclRecv, 8 ncclSend"
				if len(k.rep.Notes) != 1 || k.rep.Notes[0] != want {
					t.Errorf("notes %q, want %q", k.rep.Notes, want)
				}
			}
			if k.checkWatch(rr, "") != true {
				t.Error("with the watch off nothing is judged")
			}
		})
	}
	// An exercise that forbids no collective NCCL reports has no watch.
	unwatched := strings.Split(watchManifest, "forbid:")[0] + "forbid:\n  - symbol: ncclAlltoAll\n    why: x\nstarter:\n  fails_at: correctness\n"
	k := (&Checker{}).newCheck(Target{Exercise: loadFake(t, unwatched)}, nil)
	if n := k.watchedNames(); n != nil {
		t.Errorf("no forbidden collective: watched %v", n)
	}
	k = (&Checker{}).newCheck(Target{Exercise: ex}, nil)
	if n := k.watchedNames(); len(n) != 2 || n["AllReduce"].Symbol != "ncclAllReduce" || n["Broadcast"].Symbol != "ncclBcast" || n["AllReduce"].Why != "the exercise is to build it yourself" {
		t.Errorf("watched %v", n)
	}
	// Patterns count: "ncclAll*" forbids ncclAllReduce and ncclAllGather, "ncclReduce*" both
	// reductions (module6/fused-norm's list).
	patterns := strings.Replace(watchManifest, "symbol: ncclAllReduce", "symbol: \"ncclAll*\"", 1)
	patterns = strings.Replace(patterns, "symbol: ncclBcast", "symbol: \"ncclReduce*\"", 1)
	k = (&Checker{}).newCheck(Target{Exercise: loadFake(t, patterns)}, nil)
	n := k.watchedNames()
	for name, sym := range map[string]string{"AllReduce": "ncclAllReduce", "AllGather": "ncclAllGather", "Reduce": "ncclReduce", "ReduceScatter": "ncclReduceScatter"} {
		if n[name].Symbol != sym {
			t.Errorf("patterns: %s is %q, want %q (%v)", name, n[name].Symbol, sym, n)
		}
	}
	if len(n) != 4 {
		t.Errorf("patterns: watched %v", n)
	}
	for v, want := range map[string]bool{"2.28.9": true, "2.29.2": true, "3.0.0": true, "2.27.7": false, "2.9.9": false, "": true, "x": true} {
		if got := ncclAtLeast(v, 2, 28); got != want {
			t.Errorf("ncclAtLeast(%q) = %v", v, got)
		}
	}
}
