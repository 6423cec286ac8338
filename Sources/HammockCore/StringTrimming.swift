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
}
