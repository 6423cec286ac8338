/// `unknown key "urll" in a rest source (did you mean "url"?)`
public func unknownKeyMessage(_ key: String, known: [String], context: String) -> String {
    let hint = didYouMean(key, among: known)
    if !hint.isEmpty { return "unknown key \"\(key)\" in \(context)\(hint)" }
    return "unknown key \"\(key)\" in \(context); expected one of: \(known.joined(separator: ", "))"
}

/// ` (did you mean "url"?)` when a candidate is close to `word`, else nothing: the hint every "unknown …"
/// message ends with.
public func didYouMean(_ word: String, among candidates: [String]) -> String {
    closestMatch(to: word, among: candidates).map { " (did you mean \"\($0)\"?)" } ?? ""
}

/// The candidate within a small edit distance of `word`, if there is one.
///
/// The distance counts a swapped pair of neighbouring letters as one edit (`jsno` → `json`), the most
/// common typo; words of one or two letters get no suggestion, since almost anything is close to them.
public func closestMatch(to word: String, among candidates: [String]) -> String? {
    guard word.count > 2 else { return nil }
    let scored = candidates.sorted().map { (candidate: $0, distance: editDistance(word.lowercased(), $0.lowercased())) }
    guard let best = scored.min(by: { $0.distance < $1.distance }) else { return nil }
    let allowed = max(1, min(3, word.count / 3))
    return best.distance <= allowed ? best.candidate : nil
}

/// Optimal string alignment distance: insertions, deletions, substitutions and adjacent transpositions.
private func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.unicodeScalars)
    let b = Array(b.unicodeScalars)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { table[i][0] = i }
    for j in 0...b.count { table[0][j] = j }
    for i in 1...a.count {
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
            }
        }
    }
    return table[a.count][b.count]
}
