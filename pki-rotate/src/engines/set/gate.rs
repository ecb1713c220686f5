//! The gates of a set rotation: what `advance` waits for, when client
//! certificates may move, which serving target moves next, where an abort
//! goes and whom it would strand.
//!
//! Every rule here reads [`Books`]: the rotation's bookkeeping and who
//! holds their current files, without any key or certificate. `plan`
//! builds the books of the document, updates them with what the caller
//! records (an acknowledgement, a failure, a new leaf…) and asks the same
//! rules what follows, so the decisions are made before `apply` issues
//! anything, and status reads the same rules over the document as it is.

use super::{LeafSpec, Roles, Rotation, SetState, SetStep, TargetSpec};
use std::collections::{BTreeMap, BTreeSet};

/// Why an abort in trust-new strands the targets that have not loaded it.
pub(super) const STRAND_TRUST_NEW: &str = "rolling forward to completed destroys the old CA keys, so a target that has not loaded its trust-new files could be left holding material of the old CAs that nothing can re-issue or revert any more";

/// Where an abort from `step` goes.
fn abort_target(step: SetStep) -> Option<SetStep> {
    match step {
        SetStep::TrustBoth | SetStep::UpdateCerts => Some(SetStep::Reverting),
        SetStep::TrustNew => Some(SetStep::Completed),
        SetStep::Idle | SetStep::Completed | SetStep::Reverting => None,
    }
}

/// The bookkeeping the gates read.
#[derive(Debug, Clone)]
pub(super) struct Books {
    /// The rotation (running, completed, or none).
    pub rotation: Option<Rotation>,
    /// The CAs' roles.
    pub roles: BTreeMap<String, Roles>,
    /// The targets and the bundles they load.
    pub targets: BTreeMap<String, TargetSpec>,
    /// Every leaf's spec, and whether it is on its CA's next generation.
    pub leaves: BTreeMap<String, (LeafSpec, bool)>,
    /// Failed targets with their reasons.
    pub failures: BTreeMap<String, String>,
    /// Targets that acknowledged their current files and did not fail
    /// since.
    pub loaded: BTreeSet<String>,
}

impl Books {
    /// The books of `doc` as it is.
    pub fn of(doc: &SetState) -> Books {
        Books {
            rotation: doc.rotation.clone(),
            roles: doc.cas.iter().map(|(n, c)| (n.clone(), c.roles)).collect(),
            targets: doc.targets.clone(),
            leaves: doc
                .leaves
                .iter()
                .map(|(n, l)| (n.clone(), (l.spec.clone(), l.on_next)))
                .collect(),
            failures: doc
                .failures
                .iter()
                .map(|(n, f)| (n.clone(), f.reason.clone()))
                .collect(),
            loaded: doc
                .targets
                .keys()
                .filter(|t| doc.is_loaded(t))
                .cloned()
                .collect(),
        }
    }

    /// The current step.
    pub fn step(&self) -> SetStep {
        Rotation::step_of(self.rotation.as_ref())
    }

    /// The rotation in progress (None when idle or completed).
    pub fn running(&self) -> Option<&Rotation> {
        Rotation::running_of(self.rotation.as_ref())
    }

    /// Targets holding serving leaves, in the order one-at-a-time updates
    /// them.
    pub fn serving_targets(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self
            .leaves
            .values()
            .filter(|(spec, _)| spec.serving)
            .map(|(spec, _)| &spec.target)
            .collect();
        set.into_iter().cloned().collect()
    }

    /// Whether a leaf of `spec` belongs on its CA's next generation now.
    pub fn wants_next(&self, spec: &LeafSpec) -> bool {
        let Some(r) = self.running() else {
            return false;
        };
        match r.step {
            SetStep::TrustBoth => !spec.serving && r.clients_moved.contains(&spec.ca),
            SetStep::UpdateCerts => !spec.serving || r.updated_targets.contains(&spec.target),
            SetStep::TrustNew => true,
            _ => false,
        }
    }

    /// What the gate of `advance` waits for: every target holding its
    /// current files, and in update-certs every serving target moved.
    pub fn waiting(&self) -> Vec<String> {
        let mut waiting = Vec::new();
        for name in self.targets.keys() {
            if let Some(reason) = self.failures.get(name) {
                waiting.push(format!("{name} (failed: {reason})"));
            } else if !self.loaded.contains(name) {
                waiting.push(name.clone());
            }
        }
        if let Some(r) = self.running()
            && r.step == SetStep::UpdateCerts
        {
            for t in self.serving_targets() {
                if !r.updated_targets.contains(&t) {
                    waiting.push(format!("{t} (serving certificates not yet updated)"));
                }
            }
        }
        waiting
    }

    /// Where an abort goes from the current step: reverting before
    /// trust-new, completed from trust-new (going back would hand old
    /// certificates to targets that trust only the new CAs). None when
    /// there is nothing to abort (idle, completed, or already reverting).
    pub fn abort_target(&self) -> Option<SetStep> {
        abort_target(self.step())
    }

    /// The targets an abort now would strand (see the strand rule in the
    /// module documentation of [`super`]); empty when it is safe.
    pub fn stranded_by_abort(&self) -> Vec<String> {
        match self.abort_target() {
            // Completing destroys the old CA keys: wait for what the
            // advance to completed waits for.
            Some(SetStep::Completed) => self.waiting(),
            // Reverting's bundles trust old and new and its leaves are all
            // on the old CAs: whatever a target holds from idle,
            // trust-both or update-certs verifies against them both ways.
            _ => Vec::new(),
        }
    }

    /// The server targets that verify client certificates of `ca` (load
    /// its `client-ca/` bundle).
    fn verifiers_of<'a>(&'a self, ca: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        self.targets
            .iter()
            .filter(move |(_, t)| t.client_ca.contains(ca))
            .map(|(name, _)| name)
    }

    /// In trust-both, the CAs whose client certificates may move to their
    /// new client CA now: every server target that verifies them loaded a
    /// trust-both (or later) `client-ca/` bundle, which accepts both.
    pub fn client_moves_ready(&self) -> BTreeSet<String> {
        let Some(r) = self.running().filter(|r| r.step == SetStep::TrustBoth) else {
            return BTreeSet::new();
        };
        self.roles
            .iter()
            .filter(|(name, roles)| roles.client && !r.clients_moved.contains(*name))
            .filter(|(name, _)| {
                self.verifiers_of(name)
                    .all(|t| r.trust_both_loaded.contains(t))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// In update-certs one target at a time, the serving target to move
    /// next: once every target moved so far holds its new files, the first
    /// whose clients (every target trusting a CA of its serving
    /// certificates) all loaded a bundle that trusts both generations. The
    /// gate into update-certs asks the same of every target; this keeps an
    /// override of that gate from moving a server away from a client that
    /// still trusts only the old CA.
    pub fn next_serving_target(&self) -> Option<String> {
        let r = self
            .running()
            .filter(|r| r.step == SetStep::UpdateCerts && r.one_at_a_time)?;
        if !r.updated_targets.iter().all(|t| self.loaded.contains(t)) {
            return None;
        }
        self.serving_targets()
            .into_iter()
            .filter(|t| !r.updated_targets.contains(t))
            .find(|t| {
                let cas: BTreeSet<&String> = self
                    .leaves
                    .values()
                    .filter(|(spec, _)| spec.serving && &spec.target == t)
                    .map(|(spec, _)| &spec.ca)
                    .collect();
                self.targets
                    .iter()
                    .filter(|(_, spec)| spec.trusts.iter().any(|ca| cas.contains(ca)))
                    .all(|(client, _)| r.trust_both_loaded.contains(client))
            })
    }

    /// In trust-both, the client certificates that would move to their new
    /// client CA although a server target verifying them has not loaded a
    /// `client-ca/` bundle that accepts it: one line per CA.
    pub fn unready_client_moves(&self) -> Vec<String> {
        let Some(r) = self.running() else {
            return Vec::new();
        };
        self.roles
            .iter()
            .filter(|(name, roles)| roles.client && !r.clients_moved.contains(*name))
            .filter_map(|(name, _)| {
                let servers: Vec<&str> = self
                    .verifiers_of(name)
                    .filter(|t| !r.trust_both_loaded.contains(*t))
                    .map(String::as_str)
                    .collect();
                (!servers.is_empty()).then(|| {
                    format!(
                        "client certificates of CA {name} moved to its new client CA before server target(s) {} loaded a client-ca/{name}.crt that accepts them: they reject those clients until they load their files",
                        servers.join(", ")
                    )
                })
            })
            .collect()
    }

    /// Server targets that may still reject moved client certificates: a
    /// CA's client certificates moved (by an override) while the target,
    /// which verifies them, has loaded no bundle accepting the new client
    /// CA since. One line per target and CA.
    pub fn client_move_warnings(&self) -> Vec<String> {
        let Some(r) = self.running() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (t, spec) in &self.targets {
            if r.trust_both_loaded.contains(t) || self.loaded.contains(t) {
                continue;
            }
            for ca in spec
                .client_ca
                .iter()
                .filter(|ca| r.clients_moved.contains(*ca))
            {
                out.push(format!(
                    "server target {t} has not loaded a client-ca/{ca}.crt that accepts the moved {ca} client certificates: it rejects them until it does"
                ));
            }
        }
        out
    }
}

impl SetState {
    /// Where an abort goes from the current step: reverting before
    /// trust-new, completed from trust-new (going back would hand old
    /// certificates to targets that trust only the new CAs). None when
    /// there is nothing to abort (idle, completed, or already reverting).
    pub fn abort_target(&self) -> Option<SetStep> {
        abort_target(self.step())
    }

    /// The targets an abort now would strand, with why they wait (see the
    /// strand rule in the module documentation); empty when it is safe.
    pub fn stranded_by_abort(&self) -> Vec<String> {
        Books::of(self).stranded_by_abort()
    }

    /// Server targets that may still reject moved client certificates: a
    /// CA's client certificates moved (by an override) while the target,
    /// which verifies them, has loaded no bundle accepting the new client
    /// CA since. One line per target and CA.
    pub fn client_move_warnings(&self) -> Vec<String> {
        Books::of(self).client_move_warnings()
    }

    /// What `advance` waits for now (empty: it may advance).
    pub fn waiting(&self) -> Vec<String> {
        Books::of(self).waiting()
    }
}
