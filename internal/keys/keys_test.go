package keys

import (
	"slices"
	"testing"
)

func TestGolden(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Scheduled("dq", "orders", 3), "dq:{orders:3}:s"},
		{InFlight("dq", "orders", 3), "dq:{orders:3}:i"},
		{Dead("dq", "orders", 3), "dq:{orders:3}:d"},
		{Records("dq", "orders", 3), "dq:{orders:3}:m"},
		{Lease("dq", "orders", 3), "dq:{orders:3}:lease"},
		{Epoch("dq", "orders", 3), "dq:{orders:3}:epoch"},
		{Meta("dq", "orders"), "dq:{orders}:meta"},
		{Members("dq", "orders"), "dq:{orders}:members"},
		{Schedules("dq", "orders"), "dq:{orders}:sched"},
		{Changes("dq"), "dq:changes"},
		{WakeField("orders", 7), "orders:7"},
		{ControlsField("orders"), "orders:controls"},
		{Topics("app1"), "app1:topics"},
		{Scheduled("app1", "a.b-c_d", 15), "app1:{a.b-c_d:15}:s"},
	} {
		if tc.got != tc.want {
			t.Errorf("key = %q, want %q", tc.got, tc.want)
		}
	}
}

// TestGoldenNames pins the names delayq gives to fields, members and
// values inside its keys.
func TestGoldenNames(t *testing.T) {
	const prefix = "01JDQ0000000000000000A"
	for _, tc := range []struct{ got, want string }{
		{Fence, "\x00fence"},
		{GavePrefix, "\x00gave:"},
		{Gave("w1"), "\x00gave:w1"},
		{SegmentMark, "\x01"},
		{SegmentField(prefix), "\x0101JDQ0000000000000000A"},
		{SegmentExtraField, "\x03extra"},
		{SegmentPendingMark, "\x04"},
		{SegmentPendingField(prefix), "\x0401JDQ0000000000000000A"},
		{SegmentLeftField, "\x05left"},
		{LeaseValue("host-1", "01JDQ00000000000000000000X"), "host-1 01JDQ00000000000000000000X"},
		{LeaseOwner("host-1 01JDQ00000000000000000000X"), "host-1"},
		{LeaseOwner("my worker 7 r"), "my worker 7"},
		{LeaseOwner("nospace"), "nospace"},
		{ScheduleMark, "\x06"},
		{ScheduleMarkField("report"), "\x06report"},
		{RunningMark, "\x07"},
		{RunningField("order-42"), "\x07order-42"},
		{MetaPartitions, "partitions"},
		{MetaCreated, "created"},
		{MetaNext, "next"},
		{MetaSince, "since"},
		{MetaMovedPrefix, "moved:"},
		{MetaMovedCount, "moved_messages"},
		{MetaReversed, "reversed"},
		{MetaAutoSeen, "auto_seen"},
		{MetaAutoCooled, "auto_cooled"},
		{MetaPaused, "paused"},
	} {
		if tc.got != tc.want {
			t.Errorf("name = %q, want %q", tc.got, tc.want)
		}
	}
}

// TestNameKinds checks that the reserved names and message ids tell each
// other apart.
func TestNameKinds(t *testing.T) {
	const prefix = "01JDQ0000000000000000A"
	for _, tc := range []struct {
		name             string
		id, seg, pending bool
	}{
		{"01JDQ0000000000000000A0012", true, false, false},
		{"order-42", true, false, false},
		{" leading space", true, false, false},
		{Fence, false, false, false},
		{Gave("w1"), false, false, false},
		{SegmentField(prefix), false, true, false},
		{SegmentPendingField(prefix), false, false, true},
		{SegmentExtraField, false, false, false},
		{SegmentLeftField, false, false, false},
		{ScheduleMarkField("report"), false, false, false},
		{RunningField("order-42"), false, false, false},
		{"", false, false, false},
	} {
		if got := IsIDField(tc.name); got != tc.id {
			t.Errorf("IsIDField(%q) = %v, want %v", tc.name, got, tc.id)
		}
		if got := IsSegmentField(tc.name); got != tc.seg {
			t.Errorf("IsSegmentField(%q) = %v, want %v", tc.name, got, tc.seg)
		}
		if got := IsSegmentPendingField(tc.name); got != tc.pending {
			t.Errorf("IsSegmentPendingField(%q) = %v, want %v", tc.name, got, tc.pending)
		}
	}
}

func TestOfPartition(t *testing.T) {
	want := []string{
		"dq:{orders:3}:s", "dq:{orders:3}:i", "dq:{orders:3}:d", "dq:{orders:3}:m",
		"dq:{orders:3}:lease", "dq:{orders:3}:epoch",
	}
	if got := OfPartition("dq", "orders", 3); !slices.Equal(got, want) {
		t.Errorf("OfPartition = %q, want %q", got, want)
	}
}

// The reserved fields of the records HASH begin with distinct bytes, so
// that no name a user gives (a schedule's) makes one collide with another.
func TestReservedRecordFieldsDistinct(t *testing.T) {
	seen := map[byte]string{}
	for _, f := range []string{SegmentMark, SegmentExtraField, SegmentPendingMark, SegmentLeftField, ScheduleMark, RunningMark} {
		if other, dup := seen[f[0]]; dup {
			t.Errorf("reserved fields %q and %q begin with the same byte %q", f, other, f[0])
		}
		seen[f[0]] = f
	}
}
