import HammockCore

/// What a door other than the consumers' (`--http`'s `/healthz` and `/readyz`) asks the running engine. The
/// loop answers in its own turn, so an answer says the loop runs, and reads its state as it is then.
public enum EngineQuestion: Sendable {
    /// Is the loop alive? (It answers at all.)
    case health
    /// Which sources have not answered yet: every source the engine keeps loading, or those of `views`.
    case readiness(views: [ViewID]?)
}

/// The loop's answer to an `EngineQuestion`.
public enum EngineAnswer: Sendable, Equatable {
    /// The loop took the question in its turn; `sources` are configured, `watched` of them loading.
    case alive(sources: Int, watched: Int)
    /// The sources that have neither content nor an error yet, in the configuration's order; none: ready.
    case waiting([SourceID])
    /// `readiness(views:)` named views the configuration does not have.
    case unknownViews([ViewID])
}

extension EngineCore {
    /// The loop's answer to `question`, from the state it holds.
    func answer(_ question: EngineQuestion) -> EngineAnswer {
        switch question {
        case .health:
            let ids = configuration.sources.map(\.id)
            return .alive(sources: ids.count, watched: ids.count { isWatched($0) })
        case .readiness(nil):
            return .waiting(unanswered(configuration.sources.map(\.id).filter { isWatched($0) }))
        case .readiness(let views?):
            let unknown = views.filter { id in !configuration.views.contains { $0.id == id } }
            if !unknown.isEmpty { return .unknownViews(unknown) }
            let wanted = Set(configuration.views.filter { views.contains($0.id) }.flatMap(\.sources))
            return .waiting(unanswered(configuration.sources.map(\.id).filter { wanted.contains($0) }))
        }
    }

    /// Which of `ids` have neither content nor an error yet.
    private func unanswered(_ ids: [SourceID]) -> [SourceID] {
        ids.filter { id in
            guard let state = state(of: id) else { return true }
            return state.timestamp == nil && state.latestError == nil
        }
    }
}
