/// `--once`: which sources have had their load, and the `bye` that ends the run when all have, or when
/// its deadline passes.
extension EngineCore {
    mutating func markSettled(_ id: SourceID, now: EngineTime) {
        guard case .once = mode, !sources[id].phase.isLoading else { return }
        settle(id)
    }

    mutating func settle(_ id: SourceID) {
        guard !sources[id].isSettled else { return }
        sources[id].isSettled = true
        unsettledCount -= 1
        waitingUnsettled.remove(id)
    }

    /// An attempt to load `id` found no options to send: it waits for an input to change.
    mutating func waitForInputs(_ id: SourceID) {
        sources[id].phase.waitForInputs()
        if !sources[id].isSettled { waitingUnsettled.insert(id) }
    }

    mutating func countUnsettled() {
        unsettledCount = sources.all.filter { !$0.isSettled }.count
        waitingUnsettled = Set(
            sources.all.filter { $0.phase.isWaitingForInputs && !$0.isSettled }.map(\.definition.id))
    }

    mutating func checkOnceCompletion(now: EngineTime) {
        guard case .once = mode, !isFinished else { return }
        // A source still waiting for an input that has settled without content will never load. Failing one
        // can block another declared before it (a chain c → b → a), so go round until nothing changes.
        var failedOne = true
        while failedOne {
            failedOne = false
            let waiting = waitingUnsettled.sorted { sourceOrder[$0, default: .max] < sourceOrder[$1, default: .max] }
            for id in waiting where sources[id].phase.isWaitingForInputs && !sources[id].isSettled {
                let blocked = sources[id].definition.inputs.first { input in
                    sources[ifKnown: input].map { $0.isSettled && $0.state.content == nil } ?? true
                }
                if let blocked {
                    apply(
                        .error(SourceError(
                            message: "not loaded: its input \"\(blocked)\" has no content", code: .inputFailed)),
                        to: id, now: now)
                    settle(id)
                    failedOne = true
                }
            }
        }
        if unsettledCount == 0 { finishOnce(now: now, deadlinePassed: false) }
    }

    mutating func finishOnce(now: EngineTime, deadlinePassed: Bool) {
        guard case .once = mode, !isFinished else { return }
        let failed = sourceIDs.filter { id in
            let source = sources[id]
            return !source.isSettled || source.state.latestError != nil || source.state.content == nil
        }
        emitChangedViews()
        emit(.bye(reason: deadlinePassed && !failed.isEmpty ? .deadline : .once, failed: failed))
        for id in sourceIDs {
            if let load = sources[id].phase.inFlight {
                actions.append(.cancelLoad(source: id, kind: sources[id].definition.kind, loadID: load.id))
            }
        }
        actions.append(.finish(exitStatus: failed.isEmpty ? 0 : 1))
        isFinished = true
    }
}
