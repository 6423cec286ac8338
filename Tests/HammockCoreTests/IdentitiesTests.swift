import HammockCore
import HammockJSON
import Testing

/// The typed names are written and read as the plain string or number they wrap, so no line changes.
@Suite struct Identities {
    struct Names: Codable, Equatable {
        var source: SourceID
        var view: ViewID
        var kind: Kind
        var load: LoadID
    }

    @Test func eachIsCodedAsThePlainValueItWraps() throws {
        let names = Names(source: "cpu", view: "bar", kind: "shell", load: 7)
        let encoded = try JSONValueEncoder().encode(names)
        #expect(encoded == ["source": "cpu", "view": "bar", "kind": "shell", "load": 7])
        #expect(try JSONValueDecoder().decode(Names.self, from: encoded) == names)
    }

    @Test func eachPrintsAsItsValueAndLoadsCountUp() {
        let source: SourceID = "cpu"
        let load: LoadID = 41
        #expect("\(source) #\(load)" == "cpu #41")
        #expect(load.next == 42)
        #expect(SourceID("a") < SourceID("b"))
    }

    /// Tests and messages make names from interpolated text, and print lists of them: a list reads as the
    /// list of their texts did, quoted, so that summaries and failure messages did not change with the types.
    @Test func namesComeFromInterpolationAndListsOfThemReadAsListsOfText() {
        let index = 3
        let made: SourceID = "s\(index)"
        #expect(made == SourceID("s3"))
        let names: [SourceID] = ["a", made]
        #expect("\(names)" == "\(["a", "s3"])")
        #expect("\(names)" == #"["a", "s3"]"#)
    }

    /// An app that holds ids as strings names a control target with them as it did before the types.
    @Test func aControlTargetIsNamedByTextToo() {
        let name = "cpu"
        #expect(ControlTarget.source(name) == .source(SourceID("cpu")))
        #expect(ControlTarget.view(name) == .view(ViewID("cpu")))
        #expect(ControlCommand.load(.source(name)) == .load(.source("cpu")))
    }
}
