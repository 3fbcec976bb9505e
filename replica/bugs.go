package replica

// Deliberate protocol bugs, for tests only.
//
// Each constant below is false in every normal build. A build tag turns one
// on, to prove that the scenario tests catch the rule it breaks:
//
//	replog_bug_truncate_hw        bugTruncateToHW: a follower truncates its log to
//	                              its HW on restart and on becoming follower
//	                              (pre-KIP-101 Kafka).
//	replog_bug_hw_no_epoch_start  bugHWNoEpochStart: the leader's HW ignores the
//	                              epoch-start condition (commits old-epoch entries
//	                              by counting: Raft figure 8).
//	replog_bug_vote_no_logcheck   bugVoteNoLogCheck: votes and pre-votes are
//	                              granted without the log up-to-date check.
//	replog_bug_ack_leader_write   bugAckLeaderWrite: the leader acknowledges a
//	                              proposal once its own write is durable, without
//	                              waiting for the HW.
//	replog_bug_retention_above_hw bugRetentionAboveHW: the leader's DeleteBefore
//	                              moves its log start up to its durable LEO,
//	                              ignoring its HW (R51): it deletes entries not
//	                              yet committed.
//	replog_bug_wiped_voter        bugIgnoreDirs: voters are judged by node ID
//	                              alone, as before issue 12: a vote request's
//	                              and a grant's directories are not checked,
//	                              and any fetch from a voter's ID counts (a
//	                              wiped voter votes as its old self, R56).
//	replog_bug_fresh_bootstrap   bugFreshBootstrap: a store whose log holds no
//	                              voter set asks only its bootstrap voters
//	                              before bootstrapping, as before R60 (a wiped
//	                              node listing only fresh voters forks the
//	                              cluster, sim bug G).
//	replog_bug_reset_no_epoch     bugResetNoEpoch: a follower's reset to its
//	                              leader's log start keeps no epoch row, so
//	                              its empty log compares as epoch 0 in
//	                              elections (sim seed 80201032 x5000).
//	replog_bug_vouch_request_epoch bugVouchRequestEpoch: a vote answer
//	                              naming its leader vouches for it in the
//	                              epoch the request asked for, not in the
//	                              responder's own (sim bug L).
//	replog_bug_wiped_not_leader   bugWipedNotLeader: a node refuses a forwarded
//	                              append of its epoch as never appended
//	                              though it cannot tell who led the epoch
//	                              (a wiped node's old disk may have: sim
//	                              bug K).
//	replog_bug_reset_no_set       bugResetNoSet: a follower that resets to its
//	                              leader's log start does not record the
//	                              leader's voter-set rows below it (sim bug
//	                              I).
//	replog_bug_no_outgoing        bugNoOutgoing: a replica whose newest,
//	                              uncommitted voter set removed it observes
//	                              and never campaigns (sim bug M).
//	replog_bug_drop_owed          bugDropOwed: a voter change other than an
//	                              automatic replacement's steps drops the
//	                              owed incarnations of the set in force (a
//	                              replaced node is forgotten, sim bug J2).
//	replog_bug_removed_stuck      bugNoRemovedRestand: a leader fenced by a
//	                              removed voter's later epoch does not
//	                              stand again (the removed voter never
//	                              learns it was removed: sim seed
//	                              92067076 x1500).
//
// Example: go test -tags replog_bug_truncate_hw ./replica -run TestScenarios
// (must fail). Never build a binary with these tags.
