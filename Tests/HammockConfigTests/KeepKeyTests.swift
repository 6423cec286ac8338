import HammockConfig
import HammockCore
import Testing

/// `keep: true`: a source that polls under `hammock serve` while no client watches it. A boolean common key,
/// read and refused as `cache:` is, and inheritable from `defaults:`.
@Suite struct KeepKey {
    @Test func keepIsReadFalseByDefaultAndInheritedFromDefaults() throws {
        let configuration = try load(
            """
            sources:
              kept: { kind: fake, keep: true }
              plain: { kind: fake }
              off: { kind: fake, keep: false }
            """
        ).configuration
        #expect(configuration.source("kept")?.keep == true)
        #expect(configuration.source("plain")?.keep == false)
        #expect(configuration.source("off")?.keep == false)
        let inherited = try load(
            """
            defaults: { keep: true }
            sources:
              a: { kind: fake }
              b: { kind: fake, keep: false }
            """
        ).configuration
        #expect(inherited.source("a")?.keep == true)
        #expect(inherited.source("b")?.keep == false)
    }

    @Test func aKeepThatIsNotABooleanIsRefusedWhereItIsWritten() {
        let text = """
            sources:
              a: { kind: fake, keep: maybe }
              b: { kind: fake, keep: [true] }
            """
        #expect(
            problems(text) == [
                "2:26: keep must be true or false, found a string",
                "3:26: keep must be true or false, found a list",
            ])
        guard case .failure(let error) = loader().parse(text, file: "test.yaml") else {
            Issue.record("a non-boolean keep was accepted")
            return
        }
        #expect(error.diagnostics.first?.formatted(file: error.file).hasPrefix("test.yaml:2:26: keep must be") == true)
    }
}
