import HammockCore

/// A `Loadable` that is a view: several loadables merged under display rules, with a status, errors by
/// member and a "try again". Hammock's views (`TypedView`) and client-side groups (`LoadableGroup`) are both,
/// so UI code (`ViewModel`) and groups of groups treat them alike.
public protocol ViewLoadable<Content>: Loadable {
    /// The latest view state: status, content, errors by source (or member), `canTryAgain`.
    var viewState: ViewLoadableState<Content> { get }
    /// The current view state, then every distinct one, latest wins.
    var viewStates: AsyncThrowingStream<ViewLoadableState<Content>, any Error> { get }
    /// Loads again what fails: the "try again" button.
    func retry() async throws
}

extension TypedView: ViewLoadable {}
extension LoadableGroup: ViewLoadable {}
