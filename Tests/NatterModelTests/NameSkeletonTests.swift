// Goal: names that look alike are compared as equal (UTS #39 skeletons), so a front end can show an impersonator
// with a fingerprint (issue 19, item 4); names that only look different stay apart. Method: pairs taken from the
// attacks (invisible characters, another script's look-alike letters, "rn" for "m", case) and honest near-misses.
import NatterModel
import Testing

@Suite("Name skeletons (UTS #39)")
struct NameSkeletonTests {
    @Test(
        "look-alike names are confusable",
        arguments: [
            ("Victim", "Victim\u{200B}"),  // zero-width space (default ignorable)
            ("Victim", "Vic\u{200D}tim"),  // zero-width joiner
            ("Victim", "Victim\u{2060}\u{FEFF}"),  // word joiner, BOM
            ("Victim", "\u{00AD}Victim"),  // soft hyphen
            ("paypal", "\u{0440}\u{0430}\u{0443}\u{0440}\u{0430}l"),  // Cyrillic р а у
            ("modern", "rnodern"),  // m → rn
            ("Alice", "AIice"),  // capital I for l
            ("Alice", "alice"),  // case
            ("José", "Jose\u{0301}"),  // precomposed and decomposed
            ("Bill", "Bi11"),  // digit one for l
            ("Ingrid", "\u{0406}ngrid"),  // Cyrillic І
        ])
    func confusable(pair: (String, String)) {
        #expect(NameSkeleton.areConfusable(pair.0, pair.1), "\(pair.0.debugDescription) ~ \(pair.1.debugDescription)")
        #expect(NameSkeleton.areConfusable(pair.1, pair.0))
    }

    @Test(
        "different names stay different",
        arguments: [("Bob", "Rob"), ("Alice", "Alicia"), ("Ann", "Anna"), ("Zoë", "Zoe"), ("李", "季"), ("Ada 🐱", "Ada 🐶")])
    func distinct(pair: (String, String)) {
        #expect(!NameSkeleton.areConfusable(pair.0, pair.1), "\(pair.0.debugDescription) ≁ \(pair.1.debugDescription)")
    }

    @Test("the skeleton drops default-ignorable characters and maps to prototypes")
    func skeletonValues() {
        #expect(NameSkeleton.skeleton("Victim\u{200B}") == NameSkeleton.skeleton("Victim"))
        #expect(NameSkeleton.skeleton("\u{0430}") == "a")
        #expect(NameSkeleton.skeleton("m") == "rn")
        #expect(NameSkeleton.skeleton("") == "")
        // Hangul syllables decompose by arithmetic: a syllable and its jamo are one name.
        #expect(NameSkeleton.skeleton("\u{D55C}") == NameSkeleton.skeleton("\u{1112}\u{1161}\u{11AB}"))
        // Canonical order: two marks in either order are the same name.
        #expect(NameSkeleton.skeleton("a\u{0301}\u{0323}") == NameSkeleton.skeleton("a\u{0323}\u{0301}"))
    }
}
