package model

// DefaultMaxProgramSize is the default bound on ProgramSize, in bytes
// (a master's --max-program-size): 64 KiB, room for a Spark submission's
// command line with its configuration, the environment of a job and its
// artifacts, while a single request body (1 MiB) could carry sixteen
// times as much.
const DefaultMaxProgramSize = 64 << 10

// ProgramSize is the size of the program a submission asks a worker to
// run, in bytes: the bytes of every string of it the submitter chooses
// (its name, the user it runs as, each argument, each environment name and
// value, each string of each artifact, each custom resource's name, its
// namespace's name). Those are what a
// submitter can make long; the numbers and flags beside them have a fixed
// size. Every master keeps the row for as long as the tables hold it, and
// sends the program in each heartbeat answer that places it, so a bound on
// this size bounds what one submission costs them. The submission's ID,
// token and client are not its program: the leader makes the first and
// bounds the others apart.
func (c *SubmitDriver) ProgramSize() int {
	return len(c.Name) + c.DriverSpec.programSize()
}

// ProgramSize is the size of the executor program of an app registration,
// as SubmitDriver.ProgramSize counts a driver's: its name, user, argv,
// environment, artifacts (those taken from the registering driver
// included: every executor stages them), resource names and namespace. The
// registering driver's ID and the token are not counted.
func (c *RegisterApp) ProgramSize() int {
	spec := c.Spec()
	return len(c.Name) + len(c.Namespace) + spec.programSize()
}

// ProgramSize is the size of the program of a driver's row, as
// SubmitDriver.ProgramSize counts the submission that made it: the row
// keeps the same strings.
func (d *Driver) ProgramSize() int {
	return len(d.Name) + d.DriverSpec.programSize()
}

// ProgramSize is the size of the executor program of an app's row, as
// RegisterApp.ProgramSize counts the registration that made it.
func (a *App) ProgramSize() int {
	return len(a.Name) + len(a.Namespace) + a.ExecutorSpec.programSize()
}

// programSize adds up the bytes of the strings of a program.
func programSize(argv []string, env map[string]string, artifacts []Artifact, resources ResourceAmounts) int {
	n := 0
	for _, a := range argv {
		n += len(a)
	}
	for k, v := range env {
		n += len(k) + len(v)
	}
	for _, a := range artifacts {
		n += len(a.Source) + len(a.URL) + len(a.Upload) + len(a.SHA256) + len(a.Archive) + len(a.Name) + len(a.Dest)
	}
	for name := range resources {
		n += len(name)
	}
	return n
}
