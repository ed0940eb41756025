"""A built-in English -> Japanese corpus of everyday sentences, made from patterns, for demos and tests.

Four sentence patterns (subject + verb + object, "like", "really like", subject + adjective), each in four
forms (present, past, negative, past negative), with correct English agreement and Japanese conjugation,
and a lexicon of the subjects and objects on their own:

    I drink green tea.            私は緑茶を飲みます。
    My sister didn't borrow an umbrella.   姉は傘を借りませんでした。
    The cat really likes fish.    猫は魚がとても好きです。
    The coffee wasn't hot.        コーヒーは熱くありませんでした。

`make_demo_corpus(seed)` holds out sentences whose combination of subject, object and form never occurs in
training: for a random share of the (subject, object) pairs, one form is held out (see `make_demo_corpus`).
"""

import random
from dataclasses import dataclass

FORMS = ("present", "past", "negative", "past_negative")

# (English, Japanese topic, third person singular?)
SUBJECTS = [
    ("I", "私", False),
    ("You", "あなた", False),
    ("He", "彼", True),
    ("She", "彼女", True),
    ("We", "私たち", False),
    ("They", "彼ら", False),
    ("My brother", "兄", True),
    ("My sister", "姉", True),
    ("The teacher", "先生", True),
    ("My friend", "友達", True),
    ("My mother", "母", True),
    ("Tom", "トム", True),
    ("The students", "学生たち", False),
    ("My parents", "両親", False),
]

# English base, third person, past; Japanese stem for -masu forms; objects (English, Japanese)
VERBS = [
    (
        "drink",
        "drinks",
        "drank",
        "飲み",
        [
            ("green tea", "緑茶"),
            ("coffee", "コーヒー"),
            ("water", "水"),
            ("milk", "牛乳"),
            ("orange juice", "オレンジジュース"),
        ],
    ),
    (
        "eat",
        "eats",
        "ate",
        "食べ",
        [
            ("bread", "パン"),
            ("rice", "ご飯"),
            ("apples", "りんご"),
            ("sushi", "寿司"),
            ("cake", "ケーキ"),
            ("fish", "魚"),
        ],
    ),
    (
        "borrow",
        "borrows",
        "borrowed",
        "借り",
        [("books", "本"), ("an umbrella", "傘"), ("a pen", "ペン"), ("manga", "漫画")],
    ),
    (
        "buy",
        "buys",
        "bought",
        "買い",
        [("a car", "車"), ("flowers", "花"), ("a bag", "かばん"), ("shoes", "靴"), ("bread", "パン")],
    ),
    ("watch", "watches", "watched", "見", [("movies", "映画"), ("TV", "テレビ"), ("soccer", "サッカー")]),
    ("write", "writes", "wrote", "書き", [("a letter", "手紙"), ("emails", "メール"), ("a report", "レポート")]),
    (
        "study",
        "studies",
        "studied",
        "勉強し",
        [("English", "英語"), ("Japanese", "日本語"), ("math", "数学"), ("history", "歴史")],
    ),
]

LIKED = [
    ("green tea", "緑茶"),
    ("coffee", "コーヒー"),
    ("cats", "猫"),
    ("dogs", "犬"),
    ("books", "本"),
    ("music", "音楽"),
    ("sushi", "寿司"),
    ("summer", "夏"),
    ("winter", "冬"),
    ("soccer", "サッカー"),
    ("movies", "映画"),
    ("cake", "ケーキ"),
]

# English noun, Japanese noun, adjectives that fit it: (English, Japanese i-adjective)
DESCRIBED = [
    ("The coffee", "コーヒー", [("hot", "熱い"), ("cold", "冷たい"), ("good", "おいしい")]),
    ("The tea", "お茶", [("hot", "熱い"), ("cold", "冷たい"), ("good", "おいしい")]),
    ("The room", "部屋", [("big", "広い"), ("small", "狭い"), ("cold", "寒い"), ("bright", "明るい")]),
    ("The book", "本", [("interesting", "面白い"), ("difficult", "難しい"), ("long", "長い"), ("old", "古い")]),
    ("The car", "車", [("new", "新しい"), ("old", "古い"), ("fast", "速い"), ("expensive", "高い")]),
    ("The test", "テスト", [("difficult", "難しい"), ("easy", "易しい"), ("long", "長い")]),
    ("The movie", "映画", [("interesting", "面白い"), ("long", "長い"), ("scary", "怖い")]),
    ("The bag", "かばん", [("heavy", "重い"), ("light", "軽い"), ("expensive", "高い"), ("new", "新しい")]),
]


@dataclass(frozen=True)
class Pair:
    english: str
    japanese: str
    subject: str
    object: str
    form: str


COPULA = {"present": "です", "past": "でした", "negative": "ではありません", "past_negative": "ではありませんでした"}


def masu(stem: str, form: str) -> str:
    return stem + {"present": "ます", "past": "ました", "negative": "ません", "past_negative": "ませんでした"}[form]


def i_adjective(adjective: str, form: str) -> str:
    """熱い -> 熱いです / 熱かったです / 熱くありません / 熱くありませんでした."""
    stem = adjective[:-1]
    return {
        "present": adjective + "です",
        "past": stem + "かったです",
        "negative": stem + "くありません",
        "past_negative": stem + "くありませんでした",
    }[form]


def english_verb(subject: str, third_person: bool, base: str, third: str, past: str, form: str) -> str:
    if form == "present":
        return f"{subject} {third if third_person else base}"
    if form == "past":
        return f"{subject} {past}"
    if form == "negative":
        return f"{subject} {'doesn' if third_person else 'don'}'t {base}"
    return f"{subject} didn't {base}"


def verb_pairs() -> list[Pair]:
    pairs = []
    for subject, topic, third_person in SUBJECTS:
        for base, third, past, stem, objects in VERBS:
            for obj, obj_ja in objects:
                for form in FORMS:
                    english = f"{english_verb(subject, third_person, base, third, past, form)} {obj}."
                    japanese = f"{topic}は{obj_ja}を{masu(stem, form)}。"
                    pairs.append(Pair(english, japanese, subject, obj, form))
    return pairs


def like_pairs() -> list[Pair]:
    pairs = []
    for subject, topic, third_person in SUBJECTS:
        for obj, obj_ja in LIKED:
            for form in FORMS:
                english = f"{english_verb(subject, third_person, 'like', 'likes', 'liked', form)} {obj}."
                pairs.append(Pair(english, f"{topic}は{obj_ja}が好き{COPULA[form]}。", subject, obj, form))
            really = f"{subject} really {'likes' if third_person else 'like'} {obj}."
            pairs.append(Pair(really, f"{topic}は{obj_ja}がとても好きです。", subject, obj, "really"))
    return pairs


def adjective_pairs() -> list[Pair]:
    copula = {"present": "is", "past": "was", "negative": "isn't", "past_negative": "wasn't"}
    return [
        Pair(
            f"{noun} {copula[form]} {adjective}.",
            f"{noun_ja}は{i_adjective(adjective_ja, form)}。",
            noun,
            adjective,
            form,
        )
        for noun, noun_ja, adjectives in DESCRIBED
        for adjective, adjective_ja in adjectives
        for form in FORMS
    ]


def lexicon_pairs() -> list[Pair]:
    """Each subject and object on its own (`my sister` -> `姉`), as a dictionary would list them."""
    words = {(english, japanese) for english, japanese, _ in SUBJECTS}
    words |= {obj for *_, objects in VERBS for obj in objects} | set(LIKED)
    words |= {(noun, noun_ja) for noun, noun_ja, _ in DESCRIBED}
    return [Pair(english, japanese, english, "", "word") for english, japanese in sorted(words)]


def all_pairs() -> list[Pair]:
    """Every sentence the patterns make, and the lexicon, in a fixed order."""
    return verb_pairs() + like_pairs() + adjective_pairs() + lexicon_pairs()


def make_demo_corpus(seed: int = 0, test_fraction: float = 0.3) -> dict[str, list[Pair]]:
    """{"train": [...], "test": [...]}: every test sentence is a combination never seen in training.

    A random `test_fraction` of the (subject, object) pairs is chosen, and for each one form (tense or negation)
    is held out: "My sister didn't borrow an umbrella." is in the test split while training has that subject
    with that object only in other forms, and that form only with other subjects and objects.
    """
    pairs = all_pairs()
    rng = random.Random(seed)
    combinations = sorted({(pair.subject, pair.object) for pair in pairs if pair.object})
    chosen = rng.sample(combinations, round(len(combinations) * test_fraction))
    held_out = {(subject, obj, rng.choice(FORMS)) for subject, obj in chosen}
    test = [pair for pair in pairs if (pair.subject, pair.object, pair.form) in held_out]
    train = [pair for pair in pairs if (pair.subject, pair.object, pair.form) not in held_out]
    rng.shuffle(train)
    rng.shuffle(test)
    return {"train": train, "test": test}


__all__ = ["Pair", "all_pairs", "make_demo_corpus"]
