import HammockYAML
import Testing

/// Inputs the fuzzers in fuzz/ found; each pins the fixed behaviour.
struct FuzzRegressionTests {
    /// libyaml puts the implicit null after a `---` with no final line break on the line after the last
    /// one; the node's mark (and any diagnostic about it) must stay inside the text.
    @Test func markAtEndOfTextWithoutFinalNewlineStaysInsideTheText() throws {
        let root = try #require(try YAML.parse("---"))
        #expect(root.scalar?.text == "")
        #expect(root.mark == YAMLMark(line: 1, column: 4))

        let document = try #require(try YAML.parse("a: 1\nb:"))
        let b = try #require(document.mapping?.last?.value)
        #expect(b.mark.line == 2)
    }

    /// libyaml counts a bare CR as a line break; the clamp to the end of the text must count it too, or
    /// every error past line 1 of a CR-only file is reported at the end of line 1.
    @Test func errorsInFilesWithBareCRLineEndingsKeepTheirLine() {
        var mark: YAMLMark?
        do {
            _ = try YAML.parse("a: 1\rb: c: d\r")
        } catch {
            mark = error.mark
        }
        #expect(mark == YAMLMark(line: 2, column: 5))
    }
}
