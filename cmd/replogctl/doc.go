// Command replogctl inspects and queries replog nodes, in the spirit of
// etcdutl and bbolt's command: online commands ask a running node through
// the example service's HTTP API (example/README.md), offline commands
// read a stopped node's data directory.
//
// Usage:
//
//	replogctl COMMAND [flags] [args]
//	replogctl help                      # the commands
//	replogctl COMMAND --help            # one command: synopsis, output, exit status, flags
//
// Online:
//
//	replogctl status --addr 127.0.0.1:8081          # role, epoch, leader, offsets, followers
//	replogctl status --addr 127.0.0.1:8081 --json   # the node's replog.Status as JSON
//	replogctl tail --addr 127.0.0.1:8081            # new committed entries, as they come
//	replogctl tail --addr 127.0.0.1:8081 --from 0 --follow=false   # everything committed so far
//
// Offline, on a stopped node's data directory (read-only; refused while a
// node holds it):
//
//	replogctl inspect DIR                # identity, segments, offsets, epochs, vote, HW checkpoint
//	replogctl verify DIR                 # every segment, every entry's checksum; exit 1 if damaged
//	replogctl dump --from 100 --to 200 DIR   # entries as JSON lines
//
// Exit status: 0 success, 1 failure, 2 a bad command line; a command may
// document others (its --help says).
//
// # Adding a command
//
// Each command is a *command registered from an init function of the file
// that holds it (register in main.go): its name, one-line summary,
// synopsis, help text and a Setup that declares its flags and returns the
// function that runs it. online.go holds status and tail; offline.go the
// commands on a data directory. main.go dispatches, prints --help from
// those fields, and maps errors to exit statuses (errUsage: 2; *exitError:
// its Code; others: 1).
package main
