package model

//go:generate go run golang.org/x/tools/cmd/stringer@v0.49.0 -type CommandType -trimprefix Cmd -output command_string.go

// Command is the payload of one Raft log entry: one of the structs below,
// by pointer. Each says its own type, so that the type byte written into
// an entry always belongs to the struct written after it (fsm.Encode),
// and a name is never paired with the wrong struct: a wrong pairing would
// decode "successfully" into zero values on every master, for ever.
type Command interface {
	// CommandType is the struct's type byte, the same for every value.
	CommandType() CommandType
}

// CommandType returns CmdRegisterWorker.
func (*RegisterWorker) CommandType() CommandType { return CmdRegisterWorker }

// CommandType returns CmdSubmitDriver.
func (*SubmitDriver) CommandType() CommandType { return CmdSubmitDriver }

// CommandType returns CmdPlaceDrivers.
func (*PlaceDrivers) CommandType() CommandType { return CmdPlaceDrivers }

// CommandType returns CmdReportAttempts.
func (*ReportAttempts) CommandType() CommandType { return CmdReportAttempts }

// CommandType returns CmdKillDriver.
func (*KillDriver) CommandType() CommandType { return CmdKillDriver }

// CommandType returns CmdWorkerLost.
func (*WorkerLost) CommandType() CommandType { return CmdWorkerLost }

// CommandType returns CmdDecommissionWorker.
func (*DecommissionWorker) CommandType() CommandType { return CmdDecommissionWorker }

// CommandType returns CmdRegisterApp.
func (*RegisterApp) CommandType() CommandType { return CmdRegisterApp }

// CommandType returns CmdPlaceExecutors.
func (*PlaceExecutors) CommandType() CommandType { return CmdPlaceExecutors }

// CommandType returns CmdRequestExecutors.
func (*RequestExecutors) CommandType() CommandType { return CmdRequestExecutors }

// CommandType returns CmdKillExecutors.
func (*KillExecutors) CommandType() CommandType { return CmdKillExecutors }

// CommandType returns CmdEndApp.
func (*EndApp) CommandType() CommandType { return CmdEndApp }

// CommandType returns CmdPruneCompleted.
func (*PruneCompleted) CommandType() CommandType { return CmdPruneCompleted }

// CommandType returns CmdSubmitDrivers.
func (*SubmitDrivers) CommandType() CommandType { return CmdSubmitDrivers }

// CommandType returns CmdReportBatch.
func (*ReportBatch) CommandType() CommandType { return CmdReportBatch }

// CommandType returns CmdApplyNamespace.
func (*ApplyNamespace) CommandType() CommandType { return CmdApplyNamespace }

// CommandType returns CmdDeleteNamespace.
func (*DeleteNamespace) CommandType() CommandType { return CmdDeleteNamespace }

// CommandType returns CmdCreateACLToken.
func (*CreateACLToken) CommandType() CommandType { return CmdCreateACLToken }

// CommandType returns CmdRevokeACLToken.
func (*RevokeACLToken) CommandType() CommandType { return CmdRevokeACLToken }

// CommandType returns CmdPreemptAttempts.
func (*PreemptAttempts) CommandType() CommandType { return CmdPreemptAttempts }

// CommandType returns CmdCreateSchedule.
func (*CreateSchedule) CommandType() CommandType { return CmdCreateSchedule }

// CommandType returns CmdDeleteSchedule.
func (*DeleteSchedule) CommandType() CommandType { return CmdDeleteSchedule }

// CommandType returns CmdSuspendSchedule.
func (*SuspendSchedule) CommandType() CommandType { return CmdSuspendSchedule }

// CommandType returns CmdFireSchedule.
func (*FireSchedule) CommandType() CommandType { return CmdFireSchedule }
