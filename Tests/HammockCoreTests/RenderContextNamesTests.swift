import HammockCore
import HammockJSON
import HammockRendering
import Testing

/// The reserved names are stated in HammockCore (`ViewRender.reservedNames`, which the configuration checks a
/// template's references against) and filled in by HammockRendering (`RenderContext`): the two must agree,
/// or a template the configuration accepts would render as a problem.
@Suite("Render context names")
struct RenderContextNames {
    @Test("a view's render context holds its sources and exactly the reserved names the configuration accepts")
    func contextHoldsExactlyTheReservedNames() {
        let view = ViewDefinition(id: "v", sources: ["load", "repo"])
        let state = ViewState(status: .data, content: ["load": "1", "repo": "x"])
        let context = RenderContext(view: view, state: state, now: Timestamp(millisecondsSince1970: 0))
        let names = Set(context.roots.keys).subtracting(view.sources.map(\.rawValue))
        #expect(names == Set(ViewRender.reservedNames))
        #expect(context.roots.count == view.sources.count + ViewRender.reservedNames.count)
    }
}
