// Package replogadmin serves a replog node's admin API over HTTP: an
// http.Handler that any service embedding a *replog.Log (or a
// *replog.Node: NewNode) mounts on its own server, so that an operator
// (and replogctl status, tail, logs) can see the node's replication state and read its committed entries, and, when the
// service allows it, change the cluster. It uses only the public
// replog.Log API.
//
//	admin, err := replogadmin.New(l, replogadmin.Options{})
//	if err != nil { ... }
//	mux.Handle("/admin/", http.StripPrefix("/admin", admin))
//
// replogctl looks for the handler under /admin by default (its --path
// flag names another mount point).
//
// # Routes
//
// Paths are relative to where the handler is mounted. Every answer is
// JSON; every error is a JSON object {"error": "...", "code": "..."} with
// an HTTP status code that says what kind of failure it is (see Codes).
//
//	GET  /            the routes, and whether state changes are allowed
//	GET  /status      replog.Status as it encodes in JSON
//	GET  /voters      the voter set in force, its offset, the leader, and
//	                  on the leader the observers and pending replacements
//	GET  /followers   on the leader: each other voter's LEO and lag in
//	                  entries (Status.RemoteLEO against the LEO), and
//	                  whether it has caught up; elsewhere 409 not_leader
//	GET  /stats       replog.Stats as encoding/json encodes it (Go field
//	                  names, durations in nanoseconds)
//	GET  /entries     a page of committed entries (below), never control
//	                  entries and never what is not yet committed
//
// With Options.AllowChanges, and only by POST:
//
//	POST /leader/transfer?to=ID   Log.TransferLeadership (to "": the most
//	                              caught-up voter); on the leader only
//	POST /voters/add?node=ID      Log.AddVoter
//	POST /voters/remove?node=ID   Log.RemoveVoter
//	POST /delete-before?offset=N  Log.DeleteBefore
//
// Without AllowChanges these answer 403 with code "read_only": the
// handler is read-only by default, so mounting it never hands out the
// power to reconfigure the cluster by accident. Each change waits at most
// Options.ChangeTimeout (and no longer than the request lives).
//
// # A Node's logs
//
// NewNode(node, opts) serves a replog.Node: every route above, at the
// same paths, for the node's default log (so that a client of a Log's
// handler works unchanged), and
//
//	GET  /logs              the default log (name "", its replicas the
//	                        voters in force), then every named log of the
//	                        node's catalog sorted by name: its replicas,
//	                        preferred leader, whether this node holds it
//	                        (local) and has it open (open), and where open
//	                        this node's role, the leader it knows, the
//	                        epoch, LEO, HW and log start
//	ANY  /logs/NAME/ROUTE   ROUTE (any route above: status, voters,
//	                        followers, stats, entries, and the changes) for
//	                        the named log NAME, open on this node
//
// A NAME the catalog does not hold, or that is not open here yet, answers
// 404 unknown_log; one this node is not a replica of, 404 not_replica with
// "replicas", the nodes to ask instead. AllowChanges covers the named
// logs' changes as the default log's.
//
// # Entries
//
// GET /entries?from=N&limit=M&wait=D answers {"entries": [...], "next",
// "hw", "log_start"}: up to limit (default 100, at most
// Options.MaxPageEntries) entries of offset from (default: the log start)
// or above, and below this node's readable high watermark, in at most
// Options.MaxPageBytes of records (one entry always fits). Each entry is
// {"offset", "epoch", "time", "data"}, data the record in base64. Offsets
// have gaps (control entries take offsets that readers never see): ask
// for the next page from "next", never from a count. With wait (a Go
// duration, at most Options.MaxWait) and nothing committed at from or
// above yet, the request waits until something is, or the wait ends (an
// empty page, next = from): a client follows the log by asking again.
// A from below the log start (the entries were deleted) answers 416 with
// code "out_of_range" and "log_start", the offset to resume from.
//
// # Codes
//
// 400 bad_request (a bad parameter, or one the Log refuses); 403 read_only, or cross_origin (a
// browser page of another origin tried a change); 404 not_found,
// unknown_node, unknown_log or not_replica; 405 method_not_allowed; 409 not_leader (with "leader"
// when known), no_successor, transfer_in_progress, change_in_progress,
// last_voter; 416 out_of_range; 500 storage_failed, halted, corrupt,
// internal; 503 no_leader, closed; 504 timeout, not_caught_up,
// transfer_timed_out, unknown_outcome (the change may or may not have
// happened: GET /voters tells).
//
// # Protecting it
//
// The handler authenticates nobody and encrypts nothing: anyone who can
// reach it reads the node's state and every committed record, and with
// AllowChanges may move the leadership, change the voters and delete
// entries. Protecting it is the embedding service's job: bind the server
// that mounts it to localhost or an admin network, put it behind the
// service's own authentication, serve it over TLS. The one protection it
// brings is against browsers: a state change that a web page of another
// origin sends is refused (http.CrossOriginProtection), so that a page an
// operator visits cannot use the operator's network position against the
// node; clients that are not browsers (replogctl, curl) are not affected.
package replogadmin
