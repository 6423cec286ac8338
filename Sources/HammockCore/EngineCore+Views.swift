import HammockJSON

/// Views: which views each source is in, and the view lines written when one of their sources changed.
extension EngineCore {
    public func viewState(_ index: Int) -> ViewState {
        viewTallies[index].evaluate { sources[ifKnown: $0]?.state.content }
    }

    /// Every view is evaluated once at first (and after a reload), then only when one of its sources changed:
    /// on the hot path an event costs the views of its source, not all of them.
    mutating func indexViews() {
        viewsBySource = [:]
        for (index, view) in configuration.views.enumerated() {
            for source in Set(view.sources) { viewsBySource[source, default: []].append(index) }
        }
        viewTallies = configuration.views.map { view in ViewTally(view) { sources[ifKnown: $0]?.state ?? SourceState() } }
        staleViews = Set(configuration.views.indices)
    }

    mutating func emitChangedViews() {
        let stale = staleViews.sorted()
        staleViews.removeAll(keepingCapacity: true)
        for index in stale {
            let state = viewState(index)
            if lastViewStates[index] != state {
                lastViewStates[index] = state
                emit(.view(id: configuration.views[index].id, state: state))
            }
        }
    }
}
