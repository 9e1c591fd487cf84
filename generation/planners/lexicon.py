"""The rule planner's small lexicon: word classes, number words and the relation/motion phrase patterns.

Everything the rule planner knows about English is here, in plain lists, so it is easy to read and extend.
Words not listed are classified by position (after a determiner or number they start a noun phrase) and by
suffix (-ing/-ed/-s right after a noun phrase read as verbs, -ly as adverbs).
"""

from __future__ import annotations

import re


def _w(text: str) -> frozenset[str]:
    return frozenset(text.split())


DETERMINERS = _w("a an the this that these those some many several his her its their our my your every each")
NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a pair of": 2,
}
# "a group of elephants": the quantity word is not the subject, the noun after "of" is.
QUANTIFIERS = _w(
    "group groups pack packs herd herds flock flocks school swarm bunch crowd team load loads piece pieces "
    "pair couple set row line stack pile handful patch"
)
PREPOSITIONS = _w(
    "in on at of from to into onto over under below above beneath underneath behind beside near by with "
    "without across through towards toward around along alongside past between among amongst against "
    "inside outside upon atop off up down during after before until within via like about than out next for"
)
CONJUNCTIONS = _w(
    "and or but while as whereas when whilst then yet so because if how what where why who which"
)
PRONOUNS = _w("it its they them their he him his she her itself themselves himself herself each other")
AUXILIARIES = _w("is are was were be been being am has have had do does did can could will would")
ADVERBS = _w(
    "slowly quickly gently softly gracefully playfully patiently smoothly hard high low together nearby "
    "overhead away back again very just still gradually spontaneously initially completely closely "
    "tenderly surely carefully quietly rapidly happily abruptly steadily suddenly finally first then "
    "here there upward upwards downward downwards leftward leftwards rightward rightwards forward "
    "forwards outside inside around apart everywhere anywhere somewhere"
)
COLOURS = _w(
    "red orange yellow green blue purple pink brown black white gray grey golden gold silver violet beige "
    "teal navy crimson turquoise lavender magenta maroon cyan indigo tan bronze rainbow colorful colourful"
)
MATERIALS = _w(
    "wooden wood metal metallic glass paper plastic leather silk velvet woolen wool stone marble ceramic "
    "crystal rubber copper iron porcelain bamboo denim linen cotton corduroy knitted steel brick concrete "
    "clay diamond slate golden fur furry fluffy plush transparent glowing shiny"
)
SHAPES = _w(
    "round square circular rectangular triangular oval spherical cubic cube conical cylindrical hexagonal "
    "pyramidal oblong elliptical spiral flat star-shaped heart-shaped diamond-shaped l-shaped curved"
)
ADJECTIVES = (
    COLOURS
    | MATERIALS
    | SHAPES
    | _w(
        "big small large tiny huge little tall short long young old elderly ancient new fresh ripe wet dry "
        "hot cold warm cozy busy sunny rainy snowy windy misty icy rocky sandy grassy lush blooming bright "
        "dark pale deep light heavy striped spotted bearded curly muscular fat thin slim slick murky "
        "glistening bioluminescent jagged rugged smooth rough soft hard clear full empty open closed "
        "serene tranquil calm quiet peaceful famous gourmet dapper mysterious tropical african arctic "
        "silver-haired cyberpunk chibi miniature toy giant wild cute happy sad angry elegant beautiful "
        "broken cracked wrinkled reflective dimly lit crowded stationary flowing shallow harvested wooded "
        "twilight autumn winter summer spring lively romantic harmonious strange magical fancy vintage "
        "modern cheerful proud majestic baby adult due parallel incoming lunar open darker matte brittle "
        "uneven invisible translucent shapeless slushy squishy moldy bare dull worn weathered straw-yellow "
        "vibrant muted faded stormy glossy polished humid crisp solid tattered dog-eared outdoor steep brand starry"
    )
)
# Concrete, countable things: a word here is a noun wherever it appears (also without a determiner).
ANIMATE = _w(
    # animals
    "cat kitten dog puppy bird horse cow sheep rabbit bunny fox wolf bear lion tiger elephant giraffe zebra "
    "monkey chimpanzee gorilla panda penguin seal dolphin shark whale fish goldfish frog toad duck swan goose "
    "owl parrot eagle hawk crow raven pigeon seagull flamingo peacock bee butterfly moth ant beetle ladybug "
    "spider snail turtle tortoise lizard chameleon snake squirrel deer mouse rat hamster hedgehog raccoon "
    "beaver otter bat kangaroo camel llama goat pig chicken chick hen rooster leopard cheetah jaguar emu "
    "jay caterpillar jellyfish octopus crab lobster firefly dragon unicorn cattle pony donkey mule sloth "
    "koala lamb calf fawn ox buffalo bison moose hippo rhino crocodile alligator swallow sparrow robin "
    # people
    "man woman boy girl child kid toddler baby person people men women children kids adult teenager "
    "chef dancer artist painter photographer cyclist swimmer surfer golfer player players athlete coach "
    "fisherman farmer gardener teacher student students musician violinist pianist conductor magician "
    "warrior sorcerer mage superhero astronaut astronauts firefighter firefighters volunteer volunteers "
    "friend friends couple parent mother father son daughter grandmother grandfather colleague customer "
    "vendor waiter detective journalist librarian tailor architect officer police celebrity partner partners "
    "family group crowd doctor nurse king queen knight pirate robot alien sprite soldier clown cowboy"
)
NOUNS = ANIMATE | _w(
    # vehicles
    "car taxi bus truck tractor bike bicycle motorcycle scooter skateboard boat canoe kayak ship sailboat "
    "submarine yacht train plane airplane jet helicopter drone rocket spacecraft spaceship balloon kite "
    "sled parachute tire wheel van jeep ambulance tram "
    # objects
    "ball football basketball frisbee table desk chair stool sofa couch bench bed lamp vase cup mug glass "
    "plate bowl pot pan spoon fork knife book notebook pencil pen eraser box bag backpack basket bucket hat "
    "cap umbrella clock watch window door wall fence gate house cabin farmhouse building church tower castle "
    "bridge statue sculpture fountain tent grill toaster refrigerator fridge oven stove television tv "
    "laptop computer phone camera tripod telescope microphone guitar piano drum drums violin trophy "
    "sword shield mirror pillow cushion blanket towel rug mat curtain curtains carpet suitcase briefcase "
    "bottle jar candle lantern lamp-post post sign scoreboard thermos buoy globe coaster staircase "
    "chandelier ribbon scarf dress jacket coat shirt sweater vest suit apron boots shoes shoe gloves glove "
    "necklace ring crown helmet glasses goggles sunglasses rope net hammock swing slide trampoline "
    "vacuum panel bowl birdhouse nest feeder scarecrow windmill anchor cliffside cliff rock rocks stone "
    "pebble shell seashell coral corals bin can barrel crate cart wagon ladder tool hammer axe needle "
    "scissors iron toy toys doll teddy block blocks brick cube puzzle gift present package envelope "
    "letter card flag banner poster painting drawing ceiling canvas easel frame photo photograph picture screen "
    "bubble bubbles cone cones flute trumpet harp bell whistle stick sticks bone "
    # food
    "apple banana orange lemon lime pear peach grape grapes cherry strawberry watermelon melon pumpkin "
    "tomato potato carrot cucumber pepper avocado corn mushroom bread toast cake cookie cookies pie pizza "
    "sushi sandwich burger egg eggs cheese butter honey chocolate candy donut popcorn coffee tea juice "
    "milk wine soup salad acorn acorns nut nuts seed seeds bamboo cornstalk "
    # plants and nature things that can be subjects
    "tree trees flower flowers rose tulip sunflower daisy lily cactus bush plant plants leaf leaves vine "
    "branch bonsai pinecone pinecones mountain peak volcano waterfall cloud clouds sun moon star stars "
    "heart hearts snowman snowflake raindrop raindrops wave waves sunlight rainbow iceberg island "
    "puddle sandcastle"
)
# Backgrounds and places: a subject only as a clause's agent, a verb's direct object, or the object of
# a strong spatial relation ("left of", "behind", ...); "in the garden" is scenery, not a subject.
SCENE_NOUNS = _w(
    "sky ground floor field meadow pasture forest woods jungle garden park beach shore seaside ocean sea "
    "lake pond river stream street road path pathway sidewalk city town square room kitchen classroom "
    "bedroom bathroom lobby office factory desert snow grass ice air background scene landscape valley "
    "savannah outback wilderness farmyard barnyard backyard yard orchard plain plains hillside hill hills "
    "space world underwater water waters countryside village plateau lagoon courtyard cave arena stage "
    "light intersection dock zoo barn farm market cafe shop restaurant library stadium ring plot tank surface "
    "horizon distance middle coast cinema concert party lawn playground theater theatre"
)
# Never subjects: time, abstract and measure words.
STOP_NOUNS = _w(
    "day days night nights morning evening afternoon dawn dusk sunset sunrise noon midnight winter autumn "
    "fall summer spring season seasons time times year years decade decades age moment hour hours minute "
    "cycle timelapse time-lapse process shape shapes color colors colour colours shade shades spectrum hues "
    "hue finish vitality strength use rhythm beat beats harmony unison awe chess soccer tag game games "
    "plans plan deal story stories practice adventure performance duet symphony melody environment lives "
    "art trends theft exposure moisture temperature tide side top bottom left right front edge end edges "
    "way direction sound music noise lot lots kind sort state form formation v-formation line view "
    "entrance rhythm steps step progress display heat weather rain wind gust breeze fire flames "
    "motion speed stock trends math one others other each lunch dinner breakfast selfie show talk "
    "outfit sauce scene vastness debris touch palm thin descent screen background none sync half bedtime"
)
# Materials that also name stuff: "a piece of metal" has "metal" as its subject.
MASS_NOUNS = _w(
    "metal glass paper plastic leather silk velvet wool stone marble ceramic crystal rubber copper iron "
    "porcelain bamboo denim linen cotton corduroy steel brick concrete clay diamond slate fur wood gold"
)
# Clothing and body parts: "man in a black suit", "girl with curly hair" attach to the subject before them.
ATTACHED_NOUNS = _w(
    "suit shirt t-shirt sweater vest dress apron jacket coat hat cap hood scarf glasses goggles sunglasses "
    "armor armour robe cloak gown helmet "
    "gloves boots shoes uniform costume skirt pants jeans hair braids beard moustache mustache head face "
    "eyes eye wings wing skin fur feathers tail paws paw trunk horns mane beak legs leg arms arm hands hand "
    "ears nose"
)
ATTACH_PREPS = _w("in with wearing")
VERBS = _w(
    "run walk fly swim jump hop climb sit stand lie rest sleep nap play eat drink chase catch throw kick "
    "roll slide glide float drift sail drive ride race move dance sing read write paint draw cook bake "
    "hold carry push pull lift drop fall rise sink descend ascend dive leap bounce spin rotate swing hang "
    "sway wave fetch dig graze grazes munch nibble peck crawl creep sneak dart dash scamper scurry slink "
    "waddle wander stroll march trot gallop bound perch land soar swoop hover buzz chirp bark howl roar "
    "chatter croak sunbathe bask lounge lay place set put stack pour fill spill melt freeze burn grow "
    "bloom wilt fade turn change become transform morph ripen rot decay rust shrink expand inflate pop "
    "break crack shatter split cut slice chop stir press touch hit strike collide bump tug pluck toss "
    "juggle wield admire watch look see stare gaze wait explore gather share build plow toast shield "
    "shelter serve haul fix repair teach discuss negotiate greet hug kiss shake feed water clean sweep "
    "wash brush tie sew knit type host conduct model guide lead follow flee escape hide seek hunt "
    "stalk pounce groom nuzzle cuddle wear dons don reflect open close shine glow flicker flutter "
    "tumble toast weave stop park cross enter exit approach pass sit squat crouch kneel bend stretch "
    "yawn smile laugh cry shout talk whisper listen reach explain investigate interview whistle rescue "
    "direct arrange design tastes taste sniff smell lick bite chew swallow spray splash blow bubble "
    "shed fetch pedal row paddle skate ski surf snowboard jog sprint hike kick dribble dodge chase "
    "photograph film record capture settle stuck suspended mounted strung placed displayed "
    "perched parked lit hanging resting lying sitting standing surrounded filled covered made dressed "
    "dropped thrown kicked kicking dropping take make pick herd munch engage rummage strut balance box "
    "light plant fish garden surface slide wave watch cook practice boxe clap claps lurk surf nibble drink splash "
    "celebrate explore howl hoot groom wag sniff play"
)
IRREGULAR_PLURALS = {
    "men": "man",
    "women": "woman",
    "children": "child",
    "people": "person",
    "mice": "mouse",
    "geese": "goose",
    "feet": "foot",
    "teeth": "tooth",
    "oxen": "ox",
    "sheep": "sheep",
    "deer": "deer",
    "fish": "fish",
    "moose": "moose",
    "bison": "bison",
    "series": "series",
    "species": "species",
    "glasses": "glasses",
    "scissors": "scissors",
    "jeans": "jeans",
    "goggles": "goggles",
    "clothes": "clothes",
    "leaves": "leaf",
    "wolves": "wolf",
    "knives": "knife",
    "shelves": "shelf",
    "calves": "calf",
    "halves": "half",
    "loaves": "loaf",
    "thieves": "thief",
    "scarves": "scarf",
    "lives": "life",
    "hooves": "hoof",
    "dice": "die",
    "cacti": "cactus",
    "fungi": "fungus",
}


def singular(word: str) -> str:
    """Best-effort English singular of a lower-case noun ("wolves" -> "wolf", "deers" -> "deer")."""
    w = word.lower()
    if w in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[w]
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("ches", "shes", "sses", "xes", "zes")) or (w.endswith("oes") and w[:-2] not in NOUNS):
        return w[:-2]
    if (
        w.endswith("s")
        and not w.endswith(("ss", "us", "sis"))
        and w not in ("axis", "iris", "chassis")
        and len(w) > 3
    ):
        stem = w[:-1]
        return IRREGULAR_PLURALS.get(stem, stem) if stem in ("deer", "sheep", "fish") else stem
    return w


def is_plural(word: str) -> bool:
    """Whether a lower-case noun looks plural (for deciding "a group" vs "one thing")."""
    w = word.lower()
    if w in ("sheep", "deer", "fish", "moose", "bison"):
        return False
    return singular(w) != w


# ---- relation and motion patterns (matched on lower-case text between noun phrases) -----------------
_ART = r"(?:the\s+|a\s+)?"
SPATIAL_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (rel, re.compile(p))
    for rel, p in [
        ("left of", rf"\b(?:on|at|to)\s+{_ART}left(?:\s+(?:hand\s+)?side)?\s+of\b"),
        ("right of", rf"\b(?:on|at|to)\s+{_ART}right(?:\s+(?:hand\s+)?side)?\s+of\b"),
        ("in front of", r"\bin\s+front\s+of\b"),
        ("behind", r"\bbehind\b|\bin\s+the\s+back\s+of\b"),
        ("on", r"\bon\s+top\s+of\b|\batop\b|\bontop\s+of\b"),
        ("under", rf"\bunder(?:neath)?\b|\bbeneath\b|\bat\s+{_ART}bottom\s+of\b"),
        ("below", r"\bbelow\b"),
        ("above", r"\babove\b|\bover\b"),
        ("near", r"\bnear(?:by)?\b|\bbeside\b|\bnext\s+to\b|\balongside\b|\bby\b|\bpast\b"),
        ("on", r"\bon(?:to)?\b|\bupon\b"),
    ]
]
# Relations strong enough to make a place noun ("an old house", "a building") a subject.
STRONG_RELATIONS = frozenset({"left of", "right of", "in front of", "behind", "above", "below", "under"})

_MOVE = (
    r"(?:mov|walk|run|fl[yi]|roll|driv|ride|rid|sail|swim|glid|slid|drift|float|dash|dart|scamper|hop|"
    r"jump|crawl|slink|sneak|stroll|pedal|gallop|trot|march|rac|zoom|swoop|head|travel|go|cross|turn|"
    r"kick|thrown|throw|push|pull|climb|spin|step|wander|rush|hurr|bounc|skat|surf|cruis|scurr|wheel|"
    r"pass|speed|shoot|shot|blow|tumbl|sweep)\w*"
)
MOTION_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (d, re.compile(p))
    for d, p in [
        ("right", rf"\bfrom\s+{_ART}left(?:\s+side)?(?:\s+of\s+the\s+\w+)?\s+to\s+{_ART}right\b"),
        ("left", rf"\bfrom\s+{_ART}right(?:\s+side)?(?:\s+of\s+the\s+\w+)?\s+to\s+{_ART}left\b"),
        ("right", r"\bleft\s+to\s+right\b"),
        ("left", r"\bright\s+to\s+left\b"),
        ("down", rf"\bfrom\s+{_ART}top(?:\s+of\s+the\s+\w+)?\s+to\s+{_ART}bottom\b"),
        ("up", rf"\bfrom\s+{_ART}bottom(?:\s+of\s+the\s+\w+)?\s+to\s+{_ART}top\b"),
        ("left", r"\bleftwards?\b|\b(?:towards?|to)\s+the\s+left\b(?!(?:\s+(?:hand\s+)?side)?\s+of\b)"),
        ("right", r"\brightwards?\b|\b(?:towards?|to)\s+the\s+right\b(?!(?:\s+(?:hand\s+)?side)?\s+of\b)"),
        ("left", rf"\b{_MOVE}\s+(?:\w+ly\s+)?left\b(?!\s+(?:of|side|to)\b)"),
        ("right", rf"\b{_MOVE}\s+(?:\w+ly\s+)?right\b(?!\s+(?:of|side|to)\b)"),
        ("up", r"\bupwards?\b|\bascen(?:d|ds|ding|ded|t)\b|\bris(?:e|es|ing)\b|\brose\b|\blifts?\b"),
        ("up", rf"\b{_MOVE}\s+(?:\w+ly\s+)?up\b|\bsurfaces?\b|\bsoar(?:s|ing)?\s+up"),
        (
            "down",
            r"\bdownwards?\b|\bdescen(?:d|ds|ding|ded|t)\b|\bfall(?:s|ing)?\b|\bfell\b|\bdrop(?:s|ped|ping)?\b"
            r"|\bsink(?:s|ing)?\b|\blower(?:s|ing)?\b|\bdiv(?:e|es|ing)\s+downwards?\b",
        ),
        ("down", rf"\b{_MOVE}\s+(?:\w+ly\s+)?down\b|\b(?:dives?|diving)\s+into\b"),
    ]
]
# Clause boundaries: punctuation and the conjunctions that start a new event.
CLAUSE_SPLIT = re.compile(r"[,;.!?]|\b(?:while|whilst|whereas|as|when|but|then)\b")
