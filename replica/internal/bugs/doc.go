// Package bugs holds the core's deliberate protocol bugs, for tests only.
//
// Each constant is false in every normal build. Its build tag turns it on,
// to prove that the tests catch the rule it breaks: a tag whose tests pass
// shows a rule that nothing checks. The replica reads the constants where
// the rule is applied (bugs.TruncateToHW and so on); off, the compiler
// drops the bug's branch. Never build a binary with these tags.
//
// Every tag, the constant it turns on, the rule it breaks
// (docs/protocol.md; docs/README.md lists every rule), and the tests
// that must fail with it:
//
//	replog_bug_truncate_hw          TruncateToHW (R15): a follower truncates
//	                                its log to its HW on restart and on
//	                                becoming follower (pre-KIP-101 Kafka).
//	                                Fails: TestScenarios (kip101_hw_truncation,
//	                                cluster_restart and others),
//	                                TestRandomized, TestTornKeyedBatchIsDropped.
//	replog_bug_hw_no_epoch_start    HWNoEpochStart (R32): the leader's HW
//	                                ignores the epoch-start condition and
//	                                commits old-epoch entries by counting
//	                                (Raft figure 8). Fails: TestScenarios
//	                                (raft_figure8), TestLeaderHW.
//	replog_bug_vote_no_logcheck     VoteNoLogCheck (R21, R24): votes and
//	                                pre-votes are granted without the log
//	                                up-to-date check. Fails: TestScenarios
//	                                (kip101_hw_truncation), TestVoteRules,
//	                                TestResetLogComparesInElections.
//	replog_bug_ack_leader_write     AckLeaderWrite (R36): the leader
//	                                acknowledges a proposal once its own
//	                                write is durable, without waiting for the
//	                                HW. Fails: TestScenarios (zombie_leader,
//	                                seed, idle_hw_propagation and others),
//	                                TestProposeOutcomes; faults TestFaults
//	                                (-faults.tags).
//	replog_bug_retention_above_hw   RetentionAboveHW (R51): the leader's
//	                                DeleteBefore moves its log start up to
//	                                its durable LEO, ignoring its HW: it
//	                                deletes entries not yet committed.
//	                                Fails: TestDeletionBounds,
//	                                TestDeleteRecords; the simulation's
//	                                retention checks (TestSimulation).
//	replog_bug_wiped_voter          IgnoreDirs (R56): voters are judged by
//	                                node ID alone: a vote request's and a
//	                                grant's directories are not checked, and
//	                                any fetch from a voter's ID counts, so a
//	                                wiped voter votes as its old self.
//	                                Fails: TestScenarios (wiped_voter),
//	                                TestVoterChanges,
//	                                TestAutoReplaceWaitsForTheOldIncarnation;
//	                                faults TestWipeVoterFaults (-faults.tags).
//	replog_bug_fresh_bootstrap      FreshBootstrap (R60): a store whose log
//	                                holds no voter set asks only its
//	                                bootstrap voters before bootstrapping, so
//	                                a wiped node listing only fresh voters
//	                                forks the cluster. Fails: TestScenarios
//	                                (fresh_bootstrap),
//	                                TestBootstrapRoundAsksAgain; root
//	                                TestWipedSoleBootstrapVoterJoinsItsCluster.
//	replog_bug_reset_no_epoch       ResetNoEpoch (R53, R21): a follower's
//	                                reset to its leader's log start keeps no
//	                                epoch row, so its emptied log compares as
//	                                epoch 0 in elections and grants a
//	                                candidate that lacks committed entries.
//	                                Fails: TestResetLogComparesInElections.
//	replog_bug_vouch_request_epoch  VouchRequestEpoch (R42): a vote answer
//	                                naming its leader vouches for it in the
//	                                epoch the request asked for, not in the
//	                                responder's own. Fails:
//	                                TestStaleSetFollowsTheNamedLeader.
//	replog_bug_wiped_not_leader     WipedNotLeader (R47, R39): a node refuses
//	                                a forwarded append of its epoch as never
//	                                appended though it cannot tell who led
//	                                the epoch (a wiped node's old disk may
//	                                have appended it). Fails:
//	                                TestWipedNodeCannotRefuseItsEpoch.
//	replog_bug_reset_no_set         ResetNoSet (R53, R55): a follower that
//	                                resets to its leader's log start does not
//	                                record the leader's voter-set rows below
//	                                it, and takes itself for a bootstrap
//	                                voter until it fetches a set. Fails:
//	                                TestResetRecordsTheLeadersVoterSets.
//	replog_bug_no_outgoing          NoOutgoing (R58): a replica whose newest,
//	                                uncommitted voter set removed it observes
//	                                and never campaigns, so a leader that
//	                                removed itself and lost its quorum before
//	                                the removal committed leaves nobody
//	                                electable. Fails: TestVoterSetFollowsTheLog,
//	                                TestScenarios (removed_leader).
//	replog_bug_compact_drop_newest  CompactDropNewest (R103): a compaction
//	                                pass drops every keyed entry below its
//	                                point, the newest of each key too, so a
//	                                reader from the start loses the key.
//	                                Fails: TestCompactionPlan; root
//	                                TestCompactionKeepsNewestPerKey; kv
//	                                TestCompactedLogReplaysToTheSameState;
//	                                faults TestCompactionSurvivesSIGKILL
//	                                (-faults.tags); the simulation
//	                                (TestSimulation, TestRegressionSeeds'
//	                                keys rows).
//	replog_bug_compact_skip_superseded
//	                                CompactSkipSuperseded (R103): a
//	                                compaction pass skips every segment below
//	                                its cleaner point whose tombstones have
//	                                not expired, even one holding a key the
//	                                dirty part supersedes, so a superseded
//	                                entry outlives the pass. Fails:
//	                                TestCompactionRewritesOnlyWhatChanged;
//	                                root TestCompactionReadsOnlyWhatChanged;
//	                                the simulation (TestRegressionSeeds' row
//	                                112 x1500 keys: a key left two entries
//	                                below a complete pass's point).
//	replog_bug_drop_owed            DropOwed (R58): a voter change other than
//	                                an automatic replacement's steps drops
//	                                the owed incarnations of the set in
//	                                force, so a replaced node is never added
//	                                back. Fails:
//	                                TestReplacementOwedThroughOtherChanges,
//	                                TestReplacementBlocksOtherChanges;
//	                                TestRegressionSeeds (row 85200189 x5000).
//	replog_bug_removed_stuck        NoRemovedRestand (R20, R45): a leader
//	                                fenced by a removed voter's later epoch
//	                                does not stand again, so the removed
//	                                voter never learns it was removed.
//	                                Fails: TestRemovedVoterInALaterEpochIsHeard.
//	replog_bug_level_ignores_peers  LevelIgnoresPeers (R68): a leader raises
//	                                the cluster feature level to what it
//	                                supports itself, without asking what the
//	                                voters and observers support, at once
//	                                when it is elected. Fails: TestScenarios
//	                                (feature_level); the simulation's
//	                                version-mix runs (TestSimulation
//	                                -sim.versions).
//	replog_bug_peer_down_prevote    PeerDownSkipsPreVote (R69): a follower
//	                                that sees its leader's connection close
//	                                stands as candidate at once, without a
//	                                pre-vote, so a connection reset by a
//	                                flapping link deposes a live leader.
//	                                Fails: TestScenarios (peer_down).
//	replog_bug_successor_all_stand  SuccessorAllStand (R106): every voter
//	                                whose leader's connection closes stands
//	                                at once, as if each were the successor,
//	                                so two voters split the vote. Fails:
//	                                TestScenarios (successor_failover: the
//	                                split vote; peer_down).
//	replog_bug_throttle_needed_voter ThrottleNeededVoter (R73): the
//	                                replication quota throttles a voter's
//	                                catch-up even when the HW needs that
//	                                voter. Fails: TestQuotaSparesAVoterTheHWNeeds.
//	replog_bug_backlog_unbounded    BacklogUnbounded (R74): the leader
//	                                appends whatever its uncommitted
//	                                backlog holds. Fails:
//	                                TestBacklogBoundRefusesAndRecovers; root
//	                                TestAppendsWaitOutAFullBacklog,
//	                                TestForwardedAppendsWaitOutAFullBacklog.
//	replog_bug_key_ckpt_no_epoch    KeyCheckpointNoEpoch (R76): New uses the
//	                                store's key checkpoint at O without
//	                                checking the epoch of the log's entry at
//	                                O-1, so a checkpoint made before a
//	                                truncation below O and a re-append in a
//	                                later epoch brings back the removed
//	                                entries' keys. Fails:
//	                                TestStaleKeyCheckpointIsIgnored.
//	replog_bug_catalog_committed_only
//	                                CatalogCommittedOnly (R80): the leader
//	                                decides a log change against the
//	                                committed catalog only, so two creates
//	                                of one name in flight both commit.
//	                                Fails:
//	                                TestLogChangesAreDecidedOnTheNewestTable;
//	                                the simulation (TestSimulation at 3000
//	                                steps).
//	replog_bug_catalog_trusts_rebuild
//	                                CatalogTrustsRebuild (R82): a table
//	                                rebuilt from a log start above 0 is
//	                                taken to hold every live log, so a
//	                                restarted node publishes a catalog
//	                                without a log recorded only by a copy
//	                                above its readable HW. Fails:
//	                                TestCatalogUnknownUntilCovered; the
//	                                simulation (TestSimulation at 3000
//	                                steps).
//	replog_bug_catalog_no_barrier
//	                                CatalogNoBarrier (R82): a follower that
//	                                needs the catalog's bound sends no
//	                                barrier of its own, so under a leader
//	                                elected on a fully committed log and
//	                                with no writes it never learns the
//	                                catalog. Fails:
//	                                TestCatalogLearnedFromIdleLeader;
//	                                TestRegressionSeeds (3212_x1500_all).
//	replog_bug_count_fetch_offset   CountFetchOffset (R70): the leader counts
//	                                a fetch's FetchOffset as the fetcher's
//	                                LEO even when the fetch says a lower
//	                                durable offset, so a pipelining
//	                                follower's entries still in its writer
//	                                commit. Fails: TestScenarios
//	                                (pipelined_fetch),
//	                                TestPipelinedFetchWithoutDurableOffset;
//	                                the simulation's durability check
//	                                (TestSimulation: seed 1 at 1500 steps,
//	                                an entry committed while durable on one
//	                                voter of two; TestRegressionSeeds: the
//	                                row 1 x1500 and 27 others).
//	replog_bug_no_contact_fetch     NoContactFetch (R77): a follower whose
//	                                writer holds its next fetch sends
//	                                nothing until its disk catches up, so a
//	                                stalled disk deposes a live leader.
//	                                Fails: TestScenarios
//	                                (disk_stall_contact),
//	                                TestContactFetchKeepsLeadershipThroughADiskStall;
//	                                faults TestDiskStallsDeposeNoOne
//	                                (-faults.tags).
//	replog_bug_contact_fetch_leo    ContactFetchLEO (R77): a contact fetch
//	                                says the follower's LEO, entries in its
//	                                writer included, as its fetch and
//	                                durable offset, so they commit before
//	                                they are durable. Fails: TestScenarios
//	                                (disk_stall_contact),
//	                                TestContactFetchKeepsLeadershipThroughADiskStall;
//	                                the simulation (TestSimulation: seed 7,
//	                                a fetch below level 8 whose offset is
//	                                above the fetcher's durable end).
//	replog_bug_deadline_ignores_parked
//	                                DeadlineIgnoresParked (R96): a leader's
//	                                NextDeadline leaves out its parked
//	                                fetches' MaxWait, so a tick before the
//	                                deadline answers one, and a shell that
//	                                ticks only at deadlines (R97) answers
//	                                it late. Fails: TestNextDeadline;
//	                                the simulation (TestSimulation: an
//	                                early tick that sends a message).
//	replog_bug_deadline_ignores_key_catchup
//	                                DeadlineIgnoresKeyCatchUp (R96): a
//	                                key table whose catch-up stopped at
//	                                keyCatchUpBytes (a restart over a
//	                                long log) adds no due-now term, so
//	                                the rest of the catch-up waits for an
//	                                unrelated event. Fails:
//	                                TestNextDeadlineKeyTableBehind.
//	replog_bug_key_checkpoint_late  KeyCheckpointLate (R96, R76): the
//	                                key checkpoint earned by what a Ready
//	                                appends after the key table's round
//	                                (R68's level entry, the keyed
//	                                proposals that round decided) goes out
//	                                in the next round, one without input.
//	                                Fails:
//	                                TestKeyCheckpointInTheRoundThatEarnsIt;
//	                                the simulation (TestRegressionSeeds,
//	                                row 100075 x1500).
//	replog_bug_quiesce_ignores_contact QuiesceIgnoresContact (R99):
//	                                check-quorum counts a parked quiescent
//	                                fetch as heard from now even after the
//	                                node reported its fetcher silent
//	                                (PeerSilent): a leader cut off from its
//	                                followers keeps leading. Fails: TestScenarios
//	                                (quiescence).
//	replog_bug_quiesce_replaced_unanswered
//	                                QuiesceReplacedUnanswered (R99): a
//	                                fetch that replaces a parked quiescent
//	                                fetch drops it unanswered, as it does
//	                                a normal one: when the replacing fetch
//	                                is of the follower's earlier life,
//	                                delayed past its restart, the follower
//	                                waits for the parked one for ever.
//	                                Fails:
//	                                TestQuiescentFetchReplacedByAnEarlierLife;
//	                                the simulation (TestRegressionSeeds,
//	                                rows 115343 and 500833 x1500).
//	replog_bug_quiesce_after_contact
//	                                QuiesceAfterContact (R99, R77): a
//	                                contact fetch's answer that shows the
//	                                leader ahead (entries or an HW past
//	                                the log end) leaves the next fetch
//	                                quiescent, as the answer before it
//	                                had. Fails:
//	                                TestContactAnswerEndsQuiescence.
//	replog_bug_quiesce_trusts_leader
//	                                QuiesceTrustsLeader (R99, R100): a
//	                                follower quiesced on its leader stays
//	                                so when that leader fetches or asks a
//	                                pre-vote: a leader that resigned with
//	                                the follower's quiescent fetch lost
//	                                (and the resync with it) is trusted as
//	                                long as its node heartbeats, and two
//	                                voters never elect again. Fails:
//	                                TestScenarios
//	                                (quiescence_leader_resigns); the
//	                                simulation (TestRegressionSeeds: the
//	                                row 3093 x1500).
//	replog_bug_quiesce_no_resync    QuiesceNoResync (R100): Resync does
//	                                nothing, so a follower whose quiescent
//	                                fetch was lost misses every append.
//	                                Fails: TestScenarios (quiescence_loss);
//	                                the simulation (a run that never
//	                                converges; docs/testing.md names it).
//	replog_bug_quiesce_misses_log_start QuiesceMissesLogStart (R99):
//	                                a leader's parked fetches are not
//	                                answered when its log start moves, so
//	                                quiesced followers of an idle log keep
//	                                a deleted prefix. Fails: TestScenarios
//	                                (quiescence_logstart).
//	replog_bug_snapshot_reset_first SnapshotResetFirst (R94): a follower
//	                                resets to its leader's log start on the
//	                                last chunk of a snapshot, before the
//	                                shell verified and installed it. Fails:
//	                                TestSnapshotBeforeReset; the simulation
//	                                (TestSimulation: a reset while the last
//	                                chunk of a snapshot above it is being
//	                                written; TestRegressionSeeds: the rows
//	                                3 x5000 and 45 x5000).
//	replog_bug_snapshot_any_offset  SnapshotAnyOffset (R93): a follower
//	                                pulls any snapshot offered, below the
//	                                log start it resets to or at it of
//	                                another epoch. Fails:
//	                                TestSnapshotTransferOutcomes (the
//	                                simulation's leaders offer only
//	                                snapshots that describe their log, so
//	                                it cannot bite there).
//	replog_bug_snapshot_no_contact  SnapshotNoContact (R92, R77): a
//	                                follower pulling a snapshot sends no
//	                                contact fetch: its leader hears nothing
//	                                from it (check-quorum), and a leader
//	                                that does not answer its requests (an
//	                                older release) loses it to a campaign.
//	                                Fails:
//	                                TestSnapshotTransferKeepsContact; the
//	                                simulation's liveness rules without the
//	                                node's contact clock (TestSimulation
//	                                -sim.quiescence=false at 5000 steps: a
//	                                voter pulling loses contact and
//	                                campaigns, or its leader loses
//	                                check-quorum; TestRegressionSeeds: the
//	                                row 45 x5000); with it, R98's
//	                                heartbeats keep contact too.
//	replog_bug_first_candidate_waits
//	                                FirstCandidateWaits (R108): a new log's
//	                                Config.FirstCandidate waits a random part
//	                                of ElectionTimeout before its first
//	                                round, as every replica does without it,
//	                                the other voters do not leave the first
//	                                round to it, and it asks again only
//	                                every quarter of it. Fails:
//	                                TestFirstCandidateCampaignsAtOnce.
//
// Tests named alone are in package replica. For example:
//
//	go test -tags replog_bug_truncate_hw ./replica                 # must fail
//	go test -tags replog_bug_no_outgoing ./replica -run 'TestVoterSetFollowsTheLog|TestScenarios'
//
// internal/simulation keeps the tags in a failure's reproduce line, and
// internal/faults builds its node binary with -faults.tags.
package bugs
