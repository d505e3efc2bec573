package model

import (
	"slices"
	"strings"
	"testing"
)

func TestParseResourceOffer(t *testing.T) {
	r := Resources{}
	if err := ParseResourceOffer(r, "gpu=0,1,2,3"); err != nil {
		t.Fatal(err)
	}
	if err := ParseResourceOffer(r, "fpga=a"); err != nil {
		t.Fatal(err)
	}
	if got := r.String(); got != "fpga=a gpu=0,1,2,3" {
		t.Fatalf("offer %q", got)
	}
	for _, bad := range []struct{ in, want string }{
		{"gpu=4", "offered twice"},
		{"tpu", "not NAME=ADDRESS"},
		{"tpu=", "no addresses"},
		{"tpu=0,,1", "address \"\""},
		{"tpu=0,0", "given twice"},
		{"TPU=0", "lowercase"},
		{"t-pu=0", "lowercase"},
		{"=0", "lowercase"},
		{"tpu=a b", "without spaces"},
	} {
		before := r.String()
		err := ParseResourceOffer(r, bad.in)
		if err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: err %v, want one line with %q", bad.in, err, bad.want)
		}
		if r.String() != before {
			t.Errorf("%q changed the offer to %q", bad.in, r.String())
		}
	}
}

func TestParseResourceAmount(t *testing.T) {
	r := ResourceAmounts{}
	if err := ParseResourceAmount(r, "gpu=2"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ in, want string }{
		{"gpu=1", "twice"},
		{"fpga", "NAME=AMOUNT"},
		{"fpga=0", "not from 1"},
		{"fpga=-1", "not from 1"},
		{"fpga=x", "whole number"},
		{"Fpga=1", "lowercase"},
	} {
		if err := ParseResourceAmount(r, bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err %v, want %q", bad.in, err, bad.want)
		}
	}
	if len(r) != 1 || r["gpu"] != 2 {
		t.Fatalf("amounts %v", r)
	}
}

func TestPickFreeHoldRelease(t *testing.T) {
	w := &Worker{Resources: Resources{"gpu": {"3", "1", "0", "2"}}}
	want := ResourceAmounts{"gpu": 2}
	held, ok := want.Pick(w.ResourcesFree())
	if !ok || !slices.Equal(held["gpu"], []string{"3", "1"}) {
		t.Fatalf("pick %v %v, want the first two of the offer", held, ok)
	}
	if err := CheckHolding(want, held, w.ResourcesFree()); err != nil {
		t.Fatal(err)
	}
	w.ResourcesUsed.Hold(held)
	if got := w.ResourcesUsed["gpu"]; !slices.Equal(got, []string{"1", "3"}) {
		t.Fatalf("used %v, want sorted", got)
	}
	if err := CheckHolding(want, held, w.ResourcesFree()); err == nil {
		t.Fatal("the same addresses held twice")
	}
	if _, ok := (ResourceAmounts{"gpu": 3}).Pick(w.ResourcesFree()); ok {
		t.Fatal("picked 3 of 2 free")
	}
	if err := CheckHolding(want, Resources{"gpu": {"0", "0"}}, w.ResourcesFree()); err == nil {
		t.Fatal("one address counted twice")
	}
	if err := CheckHolding(want, Resources{"gpu": {"0", "2"}, "fpga": {"x"}}, w.ResourcesFree()); err == nil {
		t.Fatal("held a resource not asked for")
	}
	w.ResourcesUsed.Release(held)
	if w.ResourcesUsed != nil {
		t.Fatalf("used %v after release, want nil", w.ResourcesUsed)
	}
	if got := (ResourceAmounts{"gpu": 1, "fpga": 2}).String(); got != "fpga=2 gpu=1" {
		t.Fatal(got)
	}
}
