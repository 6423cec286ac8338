import HammockProtocol
import HammockSystem
import Testing

/// The line splitter as a stream source uses it: every line a value, blank ones included, and a line past
/// `maxBytes` noticed before its newline arrives (a command may never print one).
@Suite struct StreamLineSplittingTests {
    private struct Fed {
        var pieces: [LineSplitter.Piece] = []
        var dropping = false
    }

    /// Feeds `chunks` in turn, then the end; what came out, and whether a line was being dropped at the end
    /// of the last chunk.
    private func split(_ chunks: [String], maximum: Int = 100, keepsEmptyLines: Bool = true, finish: Bool = true) -> Fed {
        var splitter = LineSplitter(maximumLineLength: maximum, keepsEmptyLines: keepsEmptyLines)
        var fed = Fed()
        for chunk in chunks {
            Array(chunk.utf8).withUnsafeBytes { splitter.feed($0) { fed.pieces.append($0) } }
        }
        fed.dropping = splitter.isDroppingLine
        if finish { splitter.finish { fed.pieces.append($0) } }
        return fed
    }

    private func lines(_ texts: String...) -> [LineSplitter.Piece] { texts.map { .line(Array($0.utf8)) } }

    @Test func linesAcrossChunksAndALastLineWithoutANewline() {
        #expect(split(["one\ntw", "o\nthr", "ee"]).pieces == lines("one", "two", "three"))
        #expect(split(["a\n", "b\n"]).pieces == lines("a", "b"))
    }

    @Test func blankLinesAreKeptForTheStreamButNotAtTheEnd() {
        #expect(split(["\na\n\n", "\n"]).pieces == lines("", "a", "", ""))
        #expect(split(["a\n"]).pieces == lines("a"), "the end after a newline is no line")
        #expect(split([""]).pieces.isEmpty)
    }

    @Test func theProtocolPassesBlankLinesOver() {
        #expect(split(["\na\n\n", "\n"], keepsEmptyLines: false).pieces == lines("a"))
    }

    @Test func aLineAtTheLimitIsALineOneByteMoreIsTooLong() {
        #expect(split(["12345\n"], maximum: 5).pieces == lines("12345"))
        #expect(split(["123456\nok\n"], maximum: 5).pieces == [.tooLong(length: 6, head: []), .line(Array("ok".utf8))])
    }

    @Test func aTooLongLineIsKnownBeforeItsNewline() {
        let fed = split(["12", "3456"], maximum: 5, finish: false)
        #expect(fed.dropping)
        #expect(fed.pieces.isEmpty)
        #expect(!split(["12", "345"], maximum: 5, finish: false).dropping)
        // The lines before it in the same chunk are out already.
        let mixed = split(["a\nb\n1234567"], maximum: 5, finish: false)
        #expect(mixed.pieces == lines("a", "b"))
        #expect(mixed.dropping)
    }

    @Test func aTooLongLineEndsWithItsNewlineAndSplittingGoesOn() {
        let fed = split(["1234567", "89\nnext\n"], maximum: 5)
        #expect(fed.pieces == [.tooLong(length: 9, head: []), .line(Array("next".utf8))])
        #expect(!fed.dropping)
    }
}
