// Package plural words counts in messages: "1 driver", "2 drivers",
// "0 cores". English alone; every noun the project counts takes a plain
// s.
package plural

import "strconv"

// Count is n followed by noun, with an s added unless n is 1: Count(1,
// "driver") is "1 driver", Count(0, "core") "0 cores". For a noun
// phrase, the s goes at its end ("running driver", "finished
// application").
func Count(n int, noun string) string {
	if n != 1 {
		noun += "s"
	}
	return strconv.Itoa(n) + " " + noun
}
