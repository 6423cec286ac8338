extension StringProtocol {
    /// The text without the characters `isTrimmed` picks at either end.
    public func trimming(_ isTrimmed: (Character) -> Bool) -> String {
        var slice = self[...]
        while let first = slice.first, isTrimmed(first) { slice.removeFirst() }
        while let last = slice.last, isTrimmed(last) { slice.removeLast() }
        return String(slice)
    }

    /// The text without whitespace and line breaks at either end.
    public func trimmingWhitespace() -> String { trimming(\.isWhitespace) }

    /// The text without spaces and tabs at either end: HTTP's optional whitespace around a header's value
    /// and its parts.
    public func trimmingSpacesAndTabs() -> String { trimming { $0 == " " || $0 == "\t" } }
}
