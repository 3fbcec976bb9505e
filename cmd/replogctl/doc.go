// Command replogctl inspects and queries replog nodes, in the spirit of
// etcdutl and bbolt's command: online commands ask a running node through
// its admin API (the replogadmin handler, which any service embedding a
// replog.Log mounts on its HTTP server), offline commands read a stopped
// node's data directory.
//
// Usage:
//
//	replogctl COMMAND [flags] [args]
//	replogctl help                      # the commands
//	replogctl COMMAND --help            # one command: synopsis, output, exit status, flags
//
// Online, against the replogadmin handler of a running node:
//
//	replogctl status --addr 127.0.0.1:8081          # role, epoch, leader, offsets, followers
//	replogctl status --addr 127.0.0.1:8081 --json   # the node's replog.Status as JSON
//	replogctl tail --addr 127.0.0.1:8081            # new committed entries, as they come
//	replogctl tail --addr 127.0.0.1:8081 --from 0 --follow=false   # everything committed so far
//
// A replog.Node's logs, through a replogadmin.NewNode handler:
//
//	replogctl logs --addr 127.0.0.1:8081                  # every log: leader, LEO, HW, replicas
//	replogctl status --addr 127.0.0.1:8081 --log orders   # one named log as this node holds it
//	replogctl tail --addr 127.0.0.1:8081 --log orders --from 0
//
// Every online command takes --log NAME: it then uses the routes of the
// named log under /logs/NAME/ (without it, the node's default log's, at
// the root, as for a single Log).
//
// Changes, only through a handler built with replogadmin.Options.AllowChanges
// (a read-only one refuses them, saying so):
//
//	replogctl transfer --addr LEADER [--to n2]      # hand the leadership over
//	replogctl add-voter --addr 127.0.0.1:8081 n4    # make a caught-up observer a voter
//	replogctl remove-voter --addr 127.0.0.1:8081 n1
//	replogctl delete-before --addr 127.0.0.1:8081 1000   # delete the entries below 1000
//
// --addr is the service's HTTP address (HOST:PORT, or http(s)://HOST:PORT);
// --path is where the service mounts the handler, /admin by default. A
// service makes itself operable by replogctl with three lines:
//
//	admin, err := replogadmin.New(l, replogadmin.Options{}) // read-only
//	...
//	mux.Handle("/admin/", http.StripPrefix("/admin", admin))
//
// The example service (go run ./example) mounts it so, read-only, beside
// its own API. status reads GET /status; tail pages through GET /entries,
// waiting at the end of the log for new entries. The handler is not
// authenticated: the service binds it to localhost or puts it behind its
// own authentication and TLS (see package replogadmin).
//
// Offline, on a stopped node's data directory (read-only; refused while a
// node holds it, with an error that says so):
//
//	replogctl inspect DIR                # identity, segments, offsets, epochs, voter sets, vote, HW checkpoint
//	replogctl verify DIR                 # every segment, every entry's checksum; exit 1 if damaged
//	replogctl dump --from 100 --to 200 DIR   # entries as JSON lines, decoded
//
// inspect explains the HW checkpoint beside the LEO: the high watermark
// as last saved (at most once a second), which may lag the LEO by design;
// a starting node learns the real one from its leader. dump decodes what
// the protocol stores, with the protocol package's decoders: a record as
// the user appended it (not the key header stored in front of a keyed
// record), with its producer, sequence number and ID where the batch
// carries them; voter sets, cursor commits, the leader's key copies,
// barriers and epoch starts labelled as such. Errors name what is wrong
// with the directory (missing, not a replog directory, locked by a
// running node, damaged), not the functions that found it.
//
// Exit status: 0 success, 1 failure, 2 a bad command line; a command may
// document others (its --help says).
//
// # Adding a command
//
// Each command is a *command registered from an init function of the file
// that holds it (register in main.go): its name, one-line summary,
// synopsis, help text and a Setup that declares its flags and returns the
// function that runs it. online.go holds status and tail, logs.go logs,
// change.go the commands that change the cluster; offline.go the
// commands on a data directory (dir.go opens it, decode.go decodes dump's
// entries). main.go dispatches, prints --help from
// those fields, and maps errors to exit statuses (errUsage: 2; *exitError:
// its Code; others: 1).
package main
