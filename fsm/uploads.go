package fsm

import "slices"

// LiveUploads returns the digests of the uploaded files (model.Artifact
// Upload) that drivers and apps not in a final state, and schedules'
// templates, name, sorted, each once: the files the masters' store must
// keep. A driver or app that has ended no longer pins its files, though
// the tables still show it; a schedule pins its template's until it is
// deleted, since each of its runs is staged from them, maybe days after
// they were uploaded. It walks the rows under the read lock without
// copying them, as Census does.
func (s *State) LiveUploads() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]struct{}{}
	for _, d := range s.t.Drivers {
		if !d.State.Terminal() {
			for _, a := range d.Artifacts {
				if a.Upload != "" {
					seen[a.Upload] = struct{}{}
				}
			}
		}
	}
	for _, ap := range s.t.Apps {
		if !ap.State.Terminal() {
			for _, a := range ap.Artifacts {
				if a.Upload != "" {
					seen[a.Upload] = struct{}{}
				}
			}
		}
	}
	for _, sc := range s.t.Schedules {
		for _, a := range sc.Template.Artifacts {
			if a.Upload != "" {
				seen[a.Upload] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for sum := range seen {
		out = append(out, sum)
	}
	slices.Sort(out)
	return out
}
